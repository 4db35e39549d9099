#!/bin/sh
# Submits one notification through the sendonce HTTP API with curl.
#
#   SENDONCE_API_URL=https://abc.execute-api.eu-west-1.amazonaws.com SENDONCE_API_KEY=so_... examples/curl.sh
#
# The body is the request of docs/request.md without tenant_id (the API key
# names the tenant). The Idempotency-Key makes a retry safe: send the same
# key and body again and the API replays its first answer. event_id is
# optional here; given, the same event sent through the queue is the same
# message. Prints the API's answer: {"id": <ledger key>, "status": "accepted"}.
set -eu

: "${SENDONCE_API_URL:?set SENDONCE_API_URL to the API's base URL}"
: "${SENDONCE_API_KEY:?set SENDONCE_API_KEY to an API key (sendonce apikey create --tenant T)}"
EVENT_ID=${EVENT_ID:-evt_01J9Z3}
IDEMPOTENCY_KEY=${IDEMPOTENCY_KEY:-order-A-1001-shipped}

exec curl --silent --show-error --fail-with-body \
	-X POST "${SENDONCE_API_URL%/}/v1/notifications" \
	-H "Authorization: Bearer $SENDONCE_API_KEY" \
	-H "Idempotency-Key: $IDEMPOTENCY_KEY" \
	-H "Content-Type: application/json" \
	--data-binary @- <<JSON
{"event_id":"$EVENT_ID","channel":"sms","template":"order_shipped",
 "recipient":{"id":"user-42","phone":"+15551234567"},"data":{"order_id":"A-1001"}}
JSON
