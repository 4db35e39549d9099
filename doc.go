// Package sendonce sends each notification once: it claims the message's
// key in a DynamoDB send ledger before it calls a provider, records what
// the provider answered, and settles every answer it cannot be sure of.
//
// # The path of one message
//
// A producer builds a [notify.Request], whose key ([notify.Request.Key])
// names the logical message (tenant, event, recipient, channel), and puts
// its JSON on the queue. A [Sender] takes each request off the queue
// ([Sender.HandleSQS] in a Lambda function, [Sender.Send] anywhere else):
//
//	request    notify.Parse validates the body; an invalid one is Invalid
//	claim      the key is claimed in the Ledger with a conditional write
//	provider   the channel's route (Routes) is tried in order: a provider is
//	           skipped only when its refusal proves it sent nothing
//	record     SENT, FAILED, or UNCERTAIN when the answer is ambiguous
//
// A redelivered request finds its row and sends nothing again (Duplicate).
// A [Reconciler], run on a schedule, settles what the sender could not:
// it asks the provider about an uncertain attempt (provider.Looker), sends
// again with the same key where the provider drops repeats, and otherwise
// follows the message class's [Policy]. [Callbacks] apply the providers'
// delivery callbacks to the same rows.
//
// Providers are [provider.Adapter] implementations: the built-in ones are
// configured by name from the environment by package lambdaapp; a
// program can bring its own and check it with providertest.Run.
//
// This package reads no environment variable and changes no global: a
// program configures everything through the config structs. The SAM
// application's functions (functions/ in the repository) read their
// configuration with package lambdaapp, which builds this package's
// types, and serve one of them.
package sendonce
