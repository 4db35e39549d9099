#!/bin/sh
# Sends one notification request (docs/request.md) to the sendonce queue
# with the AWS CLI (v1 or v2).
#
#   SENDONCE_QUEUE_URL=https://sqs.../sendonce-notifications.fifo examples/aws-cli.sh
#
# Region and credentials come from the CLI's usual configuration;
# AWS_ENDPOINT_URL_SQS (or AWS_ENDPOINT_URL) points it at a local emulator.
# On a FIFO queue (URL ending in .fifo) the message group is the tenant
# and recipient, so one recipient's messages go out in order. Prints the
# SQS message id.
set -eu

: "${SENDONCE_QUEUE_URL:?set SENDONCE_QUEUE_URL to the notification queue}"
TENANT=${TENANT:-acme}
EVENT_ID=${EVENT_ID:-evt_01J9Z3} # your id of the business event: the same on every retry
RECIPIENT=${RECIPIENT:-user-42}
PHONE=${PHONE:-+15551234567}

body=$(cat <<JSON
{"tenant_id":"$TENANT","event_id":"$EVENT_ID","channel":"sms","template":"order_shipped",
 "recipient":{"id":"$RECIPIENT","phone":"$PHONE"},"data":{"order_id":"A-1001"}}
JSON
)

set -- sqs send-message --queue-url "$SENDONCE_QUEUE_URL" --message-body "$body" --query MessageId --output text
case $SENDONCE_QUEUE_URL in
*.fifo) set -- "$@" --message-group-id "$TENANT:$RECIPIENT" --message-deduplication-id "$TENANT:$EVENT_ID:$RECIPIENT:sms:order_shipped" ;;
esac
endpoint=${AWS_ENDPOINT_URL_SQS:-${AWS_ENDPOINT_URL:-}}
if [ -n "$endpoint" ]; then
	set -- --endpoint-url "$endpoint" "$@"
fi
exec aws "$@"
