"""The reliability suite's chaos driver: the three functions on their schedules and events, under faults.

- `cutoff`: end an invocation at a chosen HTTP call, as a Lambda timeout would;
- `faults`: the fault plan (AWS and Kubernetes error fractions, capacity errors);
- `checkers`: invariants checked continuously (PDBs, do-not-disrupt, foreign resources, limits);
- `final_checks`: invariants checked once the run has settled (pods running, leaks, excess capacity);
- `watcher`: feeds the continuous checkers from watch streams and an EC2 poll;
- `scenario`: one chaos run and its figures (`python -m sim.chaos` runs one from a shell).
"""
