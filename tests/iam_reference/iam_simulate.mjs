// Decides IAM cases with @cloud-copilot/iam-simulate (a pinned devDependency), for tests/iam_reference.
// stdin: a JSON list of cases {principal, action, resource, context, identity: [statement...], resourcePolicy:
// [statement...] | null}; stdout: a JSON list, one {decision} ("Allowed", "ExplicitlyDenied" or
// "ImplicitlyDenied") or {error} per case, in order.
import { runSimulation } from '@cloud-copilot/iam-simulate'

const ACCOUNT = '123456789012'

async function decide(c) {
  const simulation = {
    request: {
      principal: c.principal,
      action: c.action,
      resource: { resource: c.resource, accountId: c.resourceAccount ?? ACCOUNT },
      contextVariables: c.context ?? {}
    },
    identityPolicies: c.identity ? [{ name: 'identity', policy: { Version: '2012-10-17', Statement: c.identity } }] : [],
    serviceControlPolicies: [],
    resourceControlPolicies: []
  }
  if (c.resourcePolicy) {
    simulation.resourcePolicy = { Version: '2012-10-17', Statement: c.resourcePolicy }
  }
  const response = await runSimulation(simulation, {})
  if (response.resultType === 'error') {
    return { error: JSON.stringify(response.errors) }
  }
  return { decision: response.overallResult }
}

let input = ''
process.stdin.setEncoding('utf8')
for await (const chunk of process.stdin) input += chunk
const out = []
for (const c of JSON.parse(input)) out.push(await decide(c))
process.stdout.write(JSON.stringify(out))
