// Package simtest is a deterministic simulation of the send protocol: the
// real sender, reconciler and webhook run against the in-memory ledger,
// simulated SQS and simulated providers (SMS may go through the real
// Twilio adapter over a simulated Twilio API), under the virtual clock of
// a testing/synctest bubble and a scheduler driven by a seeded PRNG. Every
// store and provider call is a yield point: the scheduler picks the call
// that runs next, the fault it meets, or its worker's death; one runs at
// a time. Templates, providers, routes and the settings each function
// reads from the template change while it runs. A run is a pure function
// of its seed, and the invariants are checked after every step:
// docs/simulation.md describes what is modelled, the invariants, and how
// to replay a seed (go test ./internal/simtest -run TestSim -seed=N -v).
package simtest
