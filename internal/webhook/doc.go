// Package webhook applies provider delivery callbacks to the send ledger.
//
// It serves one route per provider behind a Lambda Function URL (API
// Gateway HTTP API payload 2.0 events have the same shape and work too):
//
//	POST /callbacks/http     generic HTTP provider (docs/http-provider.md), JSON
//	POST /callbacks/twilio   Twilio message status callbacks, form-encoded;
//	                         our key rides in the StatusCallback URL: ?key=v1_...
//
// An unknown path, or a provider with no secret configured, is answered 404;
// another method 405; a body over 64 KB 413.
//
// # Order of checks
//
//  1. Signature, over the raw body (base64-decoded first when the event
//     says so), constant-time, before anything is parsed for meaning or
//     stored. Missing, wrong or stale: 401, nothing changes.
//     Generic: X-Provider-Signature, verified by httpprovider.Verify (one
//     implementation shared with the provider side), 5 minutes either way.
//     Twilio: X-Twilio-Signature over the public URL (Config.PublicBaseURL,
//     else https:// + the Host header, + raw path + raw query) and the
//     sorted form parameters, tried with and without the default port as
//     Twilio's own libraries do. Twilio signs no timestamp, so there is no
//     replay window; a replay is caught by deduplication instead.
//  2. Shape: a malformed body or a key that fails sendkey.Valid is 400.
//     A Twilio status the ledger does not track (receiving, received,
//     partially_delivered) is 200 "ignored", so Twilio stops retrying.
//  3. Deduplication by the provider's event identity, in the one table
//     under pk "cb#<provider>#<event id>" (7-day TTL): generic event_id;
//     Twilio's I-Twilio-Idempotency-Token, else MessageSid and status.
//     The store is injected (Config.Dedup: dynamodedup.Dedup in the
//     function, memdedup.Dedup in unit tests; both pass package
//     deduptest's suite).
//  4. The ledger row, by our key (a strongly consistent read). No provider
//     message id lookup is needed: both providers carry our key. An
//     unknown key (no live row: never ours, or past retention) is answered
//     200 "unknown_key", logged and counted as InvalidCallbacks
//     (reason=unknown_key): it is authenticated, and no retry can make
//     the row appear, so a 4xx would only make the provider retry forever.
//  5. The status is ranked for the row's channel (Rank) and applied with
//     ledger.ApplyDelivery, which writes only over a lower rank.
//
// # Crash safety: apply first, then record
//
// Apply writes the ledger first and the dedup record second. A crash (or
// an error, answered 500) between the two leaves no record, so the
// provider's retry runs the whole path again; ApplyDelivery is idempotent
// by rank (an equal rank is not written again), so the status lands
// exactly once and the retry is counted as a duplicate (the row already
// holds exactly that status). The other order (record, then apply) would
// turn that crash into a lost status, since the retry would stop at the
// record. Two concurrent deliveries of one callback may both pass step 3;
// the ledger lets one write, and the conditional dedup write tells the
// other it is a duplicate.
//
// # Ranks and out-of-order callbacks
//
// See Rank: a late "sent" never replaces "delivered"; failures are terminal
// over progress statuses; for email a bounce after "delivered" is kept. A
// callback that is not a duplicate and finds an equal or higher rank
// already recorded is counted as OutOfOrderCallbacks and changes nothing.
// Delivery status is independent of the send state, so a callback that
// beats the sender's SENT mark is kept (the ledger's Mark never touches it).
//
// # Errors and logs
//
// Answers carry {"status": effect} or {"error": generic text}; internal
// error text never reaches the caller. One slog line per callback carries
// the provider, key, status and effect (log key "outcome"); Twilio's To
// and From (phone numbers) are never read, so they cannot be logged. Metrics (service
// "webhook"): CallbacksApplied, DuplicateCallbacks, OutOfOrderCallbacks,
// InvalidCallbacks (dimension reason: body, signature, malformed,
// ignored_status, unknown_key).
package webhook
