// Package simtest is a deterministic simulation of the send protocol: the
// real sender (HandleSQS/Process), the real reconciler (Run) and the real
// webhook apply path run against the in-memory ledger (package memledger,
// which passes the ledger conformance suite), simulated SQS and simulated
// providers, under one virtual clock and a scheduler driven by a seeded
// PRNG. A run is a pure function of its seed.
//
// The world changes while it runs, as production's does: the tenant puts
// new template versions (package memtemplates, rendered by package
// render), some of which cannot render older messages' data; several keys
// send the same text to one recipient; the SMS provider may be the real
// Twilio adapter over a simulated Twilio API, looked up by content;
// redeploys switch a channel's provider, its route and every function's
// settings, which each function reads from its environment in
// template.yaml through package sendpath, as its main does.
//
// Every store and provider call is a yield point: the calling goroutine
// parks and the scheduler decides, from the PRNG, which parked call runs
// next, which fault it meets (a lost answer, a write that fails, a
// throttle, a refusal, a hang), or whether its worker dies there (its
// goroutine is never resumed). Only one call executes at a time. Time is
// the clock of a testing/synctest bubble: it moves only when the scheduler
// moves it, and context deadlines (the provider timeout, the Lambda
// deadline) fire on it.
//
// Invariants are checked after every step; see docs/simulation.md for
// what is modelled, the invariants, and how to replay a seed
// (go test ./internal/simtest -run TestSim -seed=N -v).
package simtest
