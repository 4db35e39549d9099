// Package capabilitytest proves the provider capability matrix end to end:
// each test drives a real provider adapter through the real sender and
// reconciler, with the ledger on DynamoDB Local, and checks the provider's
// own ground truth (what it accepted, how often) rather than the
// adapter's answers.
//
// One test per capability path:
//
//	idempotent sends     http + the provider simulator: an ambiguous
//	                     timeout is released and retried with the same
//	                     Idempotency-Key; the provider drops the repeat
//	lookup by reference  twilio + twiliotest: an ambiguous timeout is
//	                     UNCERTAIN; the reconciler asks before it resends
//	neither              smtp + an in-process go-smtp server that stalls
//	                     after DATA, and sns on moto_server: an ambiguous
//	                     outcome is UNCERTAIN and the message class decides
//
// The package holds tests only; they need DynamoDB Local (and moto_server
// for SNS), reached through internal/testenv.
package capabilitytest
