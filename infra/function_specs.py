"""The Lambda functions' names, descriptions and default sizes, without the CDK (the benchmarks read them
without starting jsii's Node.js)."""

from __future__ import annotations

from dataclasses import dataclass

from infra.config import StackConfig
from nodescale.disruption.slices import MAX_SLICES


@dataclass(frozen=True)
class FunctionSpec:
    name: str  # also the directory under lambdas/
    description: str
    memory_mb: int
    timeout_seconds: int
    reserved_concurrency: int | None = None

    def memory_for(self, config: StackConfig) -> int:
        """The memory deployed: the stack's `functionMemory` override for this function, else the default."""
        return config.function_memory.get(self.name, self.memory_mb)

    def timeout_for(self, config: StackConfig) -> int:
        """The timeout deployed: the stack's `functionTimeout` override for this function, else the default."""
        return config.function_timeout.get(self.name, self.timeout_seconds)


# The provisioner watches for pending pods for up to WATCH_SECONDS, then plans and launches, within one
# minute's tick; the disruption function drains nodes (PDB-paced evictions), hence its longer timeout;
# interruption must finish well inside a spot instance's two-minute notice.
# Sizes from the scale run (`python -m bench.scalerun`, docs/scale.md): at 5,000 nodes / 50,000 pods with
# these defaults, each function in containers of its own, every phase done on a 2-core machine (2026-11-27,
# strict sim, pods compacted as listed): the provisioner's longest pass 72.0 s (23 s its own CPU; the rest
# is sim), so 180 s; peaks 681 MiB (provisioner), 697 MiB (interruption, batches of 100 warnings), 424 MiB
# (disruption), so 1024 MB each. 10,000 nodes need
# `-c functionMemory=provisioner=3008,... -c functionTimeout=provisioner=600,interruption=300` (docs/deploy.md).
PROVISIONER = FunctionSpec("provisioner", "Launches capacity for pending pods", 1024, 180, 1)
INTERRUPTION = FunctionSpec("interruption", "Reacts to spot interruptions, rebalance, state and health events",
                            1024, 150)
# The disruption function runs once a minute, plus one invocation per slice when a large cluster's pass is
# split (usecases/disrupt/slices.py): its concurrency is the scheduled run and MAX_SLICES slices; the
# NodePool leases, not the concurrency, keep two runs off the same pool.
DISRUPTION = FunctionSpec("disruption", "Consolidates, expires, repairs and replaces drifted nodes", 1024, 300,
                          MAX_SLICES + 1)
CLEANUP = FunctionSpec("cleanup", "Removes this cluster's capacity when the stack is deleted", 512, 900)
# Only with `-c applyRbac=true` (infra/rbac.py): not one of FUNCTION_SPECS, whose roles every stack has.
RBAC = FunctionSpec("rbac", "Applies the functions' RBAC at deploy and removes it when the stack is deleted",
                    256, 300)
SCHEDULED = (PROVISIONER, DISRUPTION)
FUNCTION_SPECS = (PROVISIONER, INTERRUPTION, DISRUPTION, CLEANUP)
