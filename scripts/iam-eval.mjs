// iam-eval: the IAM policy evaluator of the tests (internal/iamfront).
//
// A long-running process: one JSON request a line on stdin, one JSON
// answer a line on stdout, in order. Each request is
//
//   {"id": 1, "principal": "arn:aws:sts::…:assumed-role/…", "account": "123456789012",
//    "policy": {…an identity policy document…}, "action": "dynamodb:GetItem",
//    "resource": "arn:aws:dynamodb:…:table/t", "context": {"dynamodb:LeadingKeys": ["v1_x"]}}
//
// and each answer {"id": 1, "result": "Allowed" | "ImplicitlyDenied" |
// "ExplicitlyDenied", "allow": ["Sid", …], "ignored": ["context key", …]}
// or {"id": 1, "error": "…"} when the simulator refuses the request (an
// unknown action, a resource of the wrong type, …).
//
// The evaluation is @cloud-copilot/iam-simulate's (AGPL-3.0-or-later): a
// test-time tool only. Nothing here enters a build, a package or a
// deployed function (docs/testing.md, "IAM enforced").
import { createInterface } from 'node:readline'
import { runSimulation } from '@cloud-copilot/iam-simulate'

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity })
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n')

// Answers go out in the order the requests came in (the Go side matches
// them by id anyway).
let chain = Promise.resolve()
rl.on('line', (line) => {
  if (!line.trim()) return
  chain = chain.then(() => answer(line)).catch((e) => out({ id: 0, error: String(e) }))
})
rl.on('close', () => chain.then(() => process.exit(0)))

async function answer(line) {
  let req
  try {
    req = JSON.parse(line)
  } catch (e) {
    out({ id: 0, error: 'bad request line: ' + e })
    return
  }
  try {
    const r = await runSimulation(
      {
        request: {
          principal: req.principal,
          action: req.action,
          resource: { resource: req.resource, accountId: req.account },
          contextVariables: req.context || {}
        },
        identityPolicies: [{ name: 'role', policy: req.policy }],
        serviceControlPolicies: [],
        resourceControlPolicies: []
      },
      {}
    )
    if (r.resultType === 'error') {
      out({ id: req.id, error: JSON.stringify(r.errors) })
      return
    }
    const results = r.resultType === 'single' ? [r.result] : r.results
    const allow = new Set()
    const ignored = new Set()
    for (const x of results) {
      for (const s of x.analysis?.identityAnalysis?.allowStatements || []) {
        allow.add(s.statement?.sid?.() || s.explain?.identifier || '')
      }
      for (const k of x.ignoredContextKeys || []) ignored.add(k)
    }
    out({ id: req.id, result: r.overallResult, allow: [...allow], ignored: [...ignored] })
  } catch (e) {
    out({ id: req.id, error: String(e && e.stack ? e.stack : e) })
  }
}
