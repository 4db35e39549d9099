package infra

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// A channel's provider parameter (SmsProvider, EmailProvider,
// PushProvider) takes a route: an ordered, comma-separated list of
// distinct providers (twilio,sns), tried in that order only after an
// attempt provably sent nothing (docs/providers.md, "Routes and
// failover"), as SENDONCE_<CHANNEL>_PROVIDER does.
//
// CloudFormation documents no way to look inside a string where it
// decides what to create: a Condition is made of Fn::Equals, Fn::And,
// Fn::Or, Fn::Not and other Conditions (Fn::Split within one is not
// documented, and nothing here can try it on AWS). So the parameter
// takes an enumerated list, every
// route of 1 to MaxRouteLength providers the template can configure for
// the channel (and "" for none), as an AllowedPattern that is the
// alternation of them (Pattern), and "the route includes provider P" is
// a Condition that is an Fn::Or of Fn::Equals over the routes that
// include P (a Rule, which cannot name a Condition, tests the same list
// with Fn::Contains). A route naming a provider twice, or one
// the channel cannot use, is not among the values, so CloudFormation
// refuses it before anything else. The lists are long, and worked out:
// RouteBlocks writes them into template.full.yaml (make template), and
// infra's tests evaluate every Condition and Rule on every value.

// MaxRouteLength is the most providers a route of the templates lists.
const MaxRouteLength = 3

// RouteChannel is a channel whose provider parameter takes a route.
type RouteChannel struct {
	// Channel is the channel's name in requests and the ledger.
	Channel string
	// Param is its template parameter.
	Param string
	// Prefix starts the names of its Conditions: <Prefix>Via<Provider>
	// (the route includes the provider), <Prefix>FailsOver (it lists
	// more than one).
	Prefix string
	// Providers are the providers the template can configure for it, in
	// the order its values list them.
	Providers []string
	// Example is a route the parameter's description shows.
	Example string
}

// RouteChannels are the channels of the templates. Email through sns is
// not offered: SNS sends email only to a topic (SENDONCE_SNS_EMAIL_TOPIC_ARN),
// which the templates do not configure.
var RouteChannels = []RouteChannel{
	{Channel: "sms", Param: "SmsProvider", Prefix: "Sms", Providers: []string{"http", "lambda", "sns", "twilio"}, Example: "twilio,sns"},
	{Channel: "email", Param: "EmailProvider", Prefix: "Email", Providers: []string{"http", "lambda", "ses", "smtp"}, Example: "ses,smtp"},
	{Channel: "push", Param: "PushProvider", Prefix: "Push", Providers: []string{"http", "lambda", "sns"}, Example: "sns,http"},
}

// Routes returns every route of the channel: each ordered list of 1 to
// MaxRouteLength distinct providers of it, joined by commas, shorter
// routes first, each length in the order of Providers.
func (c RouteChannel) Routes() []string {
	var out []string
	var grow func(route []string, n int)
	grow = func(route []string, n int) {
		if len(route) == n {
			out = append(out, strings.Join(route, ","))
			return
		}
		for _, p := range c.Providers {
			if !slices.Contains(route, p) {
				grow(append(slices.Clip(route), p), n)
			}
		}
	}
	for n := 1; n <= min(MaxRouteLength, len(c.Providers)); n++ {
		grow(nil, n)
	}
	return out
}

// Values returns the values the parameter takes: "" (the channel is not
// served), then Routes.
func (c RouteChannel) Values() []string { return append([]string{""}, c.Routes()...) }

// Pattern returns the parameter's AllowedPattern: exactly its Values.
// (An enumerated pattern rather than AllowedValues, which would be the
// same list: cfn-lint, given AllowedValues, adds a clause for every two
// tests of the parameter against different values to the formula it
// solves for each Fn::If, and with these lists that makes linting the
// template take many minutes.)
func (c RouteChannel) Pattern() string {
	return "^(" + strings.Join(c.Routes(), "|") + ")?$"
}

// orList returns "a, b or c".
func orList(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " or " + xs[len(xs)-1]
}

// Via returns the routes that include the provider.
func (c RouteChannel) Via(provider string) []string {
	return slices.DeleteFunc(c.Routes(), func(r string) bool { return !slices.Contains(strings.Split(r, ","), provider) })
}

// Cond returns the name of the Condition that the channel's route
// includes the provider.
func (c RouteChannel) Cond(provider string) string { return c.Prefix + "Via" + title(provider) }

// InvokesCond returns the name of the Condition under which the sender
// and the reconciler may invoke the channel's provider function: its
// route includes lambda and <Prefix>LambdaArn is set (a Rule requires
// the one with the other; the second half tells cfn-lint that the ARN is
// not the parameter's empty default there).
func (c RouteChannel) InvokesCond() string { return c.Prefix + "InvokesFunction" }

// FailsOverCond returns the name of the Condition that the channel's
// route lists more than one provider.
func (c RouteChannel) FailsOverCond() string { return c.Prefix + "FailsOver" }

// RouteChannelOf returns the RouteChannel of the parameter.
func RouteChannelOf(param string) (RouteChannel, bool) {
	i := slices.IndexFunc(RouteChannels, func(c RouteChannel) bool { return c.Param == param })
	if i < 0 {
		return RouteChannel{}, false
	}
	return RouteChannels[i], true
}

// The Conditions of more than one channel the generated block declares.
const (
	// UsesHttpCond: some channel's route includes http (whose bearer
	// token the channels share).
	UsesHttpCond = "UsesHttp"
	// FailsOverCond: some channel's route lists more than one provider,
	// so a failover can happen.
	FailsOverCond = "FailsOver"
)

func title(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// providerNeeds are the settings each provider requires, as the Rules of
// the generated block check them; channel-specific ones (http's URL,
// lambda's function) are RouteBlocks' own.
var providerNeeds = []struct {
	rule, provider, param string
	asserts               [][2]string // assertion, description
}{
	{"TwilioConfigured", "twilio", "SmsProvider", [][2]string{{
		"!And [!Not [!Equals [!Ref TwilioAccountSid, \"\"]], !Not [!Equals [!Ref TwilioAuthTokenParam, \"\"]], !Not [!Equals [!Ref TwilioFrom, \"\"]]]",
		"SmsProvider's route includes twilio, so TwilioAccountSid, TwilioAuthTokenParam and TwilioFrom are required."}}},
	{"SmtpConfigured", "smtp", "EmailProvider", [][2]string{
		{"!And [!Not [!Equals [!Ref SmtpHost, \"\"]], !Not [!Equals [!Ref SmtpFrom, \"\"]]]",
			"EmailProvider's route includes smtp, so SmtpHost and SmtpFrom are required."},
		{"!Or [!Equals [!Ref SmtpUsername, \"\"], !Not [!Equals [!Ref SmtpPasswordParam, \"\"]]]",
			"SmtpUsername needs SmtpPasswordParam (the SMTP password's SSM parameter): the sender refuses a user name without a password."}}},
	{"SesConfigured", "ses", "EmailProvider", [][2]string{{
		"!Not [!Equals [!Ref SesFrom, \"\"]]",
		"EmailProvider's route includes ses, so SesFrom (a verified SES identity) is required."}}},
}

// flow returns values as a YAML flow list of double-quoted strings that
// starts at column col, wrapped (wrap).
func flow(values []string, col int, indent string) string {
	items := make([]string, len(values))
	for i, v := range values {
		items[i] = strconv.Quote(v)
	}
	return wrap("[", items, "]", col, indent)
}

// wrap returns open, the items separated by commas, and close, starting
// at column col and wrapped before column 100, continuation lines
// indented by indent.
func wrap(open string, items []string, close string, col int, indent string) string {
	const width = 100
	var b strings.Builder
	b.WriteString(open)
	col += len(open)
	for i, item := range items {
		if i < len(items)-1 {
			item += ","
		} else {
			item += close
		}
		if i > 0 {
			if col+1+len(item) > width {
				b.WriteString("\n" + indent)
				col = len(indent)
			} else {
				b.WriteString(" ")
				col++
			}
		}
		b.WriteString(item)
		col += len(item)
	}
	return b.String()
}

// contains returns the Rule expression "the channel's route is one of
// routes".
func (c RouteChannel) contains(routes []string, indent string) string {
	return fmt.Sprintf("!Contains\n%s- %s\n%s- !Ref %s", indent, flow(routes, len(indent)+2, indent+"  "), indent, c.Param)
}

// anyOf returns the Condition "the channel's parameter is one of values"
// at indent: an Fn::Equals for one value, an Fn::Or of them for up to
// ten, nested Fn::Or of ten for more (Fn::Or takes 2 to 10 conditions).
func (c RouteChannel) anyOf(values []string, indent string) string {
	terms := make([]string, len(values))
	for i, v := range values {
		terms[i] = fmt.Sprintf("!Equals [!Ref %s, %s]", c.Param, strconv.Quote(v))
	}
	switch {
	case len(terms) == 1:
		return terms[0]
	case len(terms) <= 10:
		return "!Or\n" + indent + "- " + strings.Join(terms, "\n"+indent+"- ")
	}
	var b strings.Builder
	b.WriteString("!Or")
	for i := 0; i < len(terms); i += 10 {
		if chunk := terms[i:min(i+10, len(terms))]; len(chunk) == 1 {
			fmt.Fprintf(&b, "\n%s- %s", indent, chunk[0])
		} else {
			fmt.Fprintf(&b, "\n%s- %s", indent, wrap("!Or [", chunk, "]", len(indent)+2, indent+"    "))
		}
	}
	return b.String()
}

// The generated blocks of template.full.yaml RouteBlocks writes: each
// channel parameter's AllowedPattern ("SmsProvider routes", ...), the
// route Conditions and the route Rules.
const (
	RouteConditionsBlock = "route Conditions"
	RouteRulesBlock      = "route Rules"
)

// ValuesBlock returns the name of the generated block of a channel
// parameter's AllowedPattern.
func ValuesBlock(param string) string { return param + " routes" }

func begin(indent, name, what string) string {
	return fmt.Sprintf("%s%s (%s); do not edit by hand.\n", indent, beginMarker(name), what)
}

func end(indent, name string) string { return indent + endMarker(name) + "\n" }

// RouteBlocks returns the generated blocks of template.full.yaml that
// RouteChannels decides, by name (ReplaceBlock writes them).
func RouteBlocks() map[string]string {
	out := map[string]string{}
	for _, c := range RouteChannels {
		name := ValuesBlock(c.Param)
		out[name] = begin("    ", name, "infra.RouteChannels") +
			"    AllowedPattern: " + c.Pattern() + "\n" +
			fmt.Sprintf("    ConstraintDescription: one of %s, or a route of up to %d of them, each once, joined by commas (e.g. %s); empty for none.\n",
				orList(c.Providers), MaxRouteLength, c.Example) +
			end("    ", name)
	}

	var b strings.Builder
	b.WriteString(begin("  ", RouteConditionsBlock, "infra.RouteChannels"))
	var http, fails []string
	for _, c := range RouteChannels {
		for _, p := range c.Providers {
			fmt.Fprintf(&b, "  %s: %s\n", c.Cond(p), c.anyOf(c.Via(p), "    "))
		}
		// Not "" nor a route of one provider.
		fmt.Fprintf(&b, "  %s: !Not\n    - %s\n", c.FailsOverCond(), c.anyOf(append([]string{""}, c.Providers...), "      "))
		if slices.Contains(c.Providers, "lambda") {
			fmt.Fprintf(&b, "  %s: !And [!Condition %s, !Not [!Equals [!Ref %sLambdaArn, \"\"]]]\n", c.InvokesCond(), c.Cond("lambda"), c.Prefix)
		}
		if slices.Contains(c.Providers, "http") {
			http = append(http, "!Condition "+c.Cond("http"))
		}
		fails = append(fails, "!Condition "+c.FailsOverCond())
	}
	fmt.Fprintf(&b, "  %s: !Or [%s]\n", UsesHttpCond, strings.Join(http, ", "))
	fmt.Fprintf(&b, "  %s: !Or [%s]\n", FailsOverCond, strings.Join(fails, ", "))
	b.WriteString(end("  ", RouteConditionsBlock))
	out[RouteConditionsBlock] = b.String()

	b.Reset()
	b.WriteString(begin("  ", RouteRulesBlock, "infra.RouteChannels"))
	rule := func(name, cond string, asserts [][2]string) {
		fmt.Fprintf(&b, "  %s:\n    RuleCondition: %s\n    Assertions:\n", name, cond)
		for _, a := range asserts {
			fmt.Fprintf(&b, "      - Assert: %s\n        AssertDescription: %s\n", a[0], strconv.Quote(a[1]))
		}
	}
	var httpChannels []string
	for _, c := range RouteChannels {
		if slices.Contains(c.Providers, "http") {
			httpChannels = append(httpChannels, "      - "+c.contains(c.Via("http"), "        "))
		}
	}
	rule("HttpProviderConfigured", "!Or\n"+strings.Join(httpChannels, "\n"), [][2]string{{
		"!Not [!Equals [!Ref HttpProviderTokenParam, \"\"]]",
		"A channel's route includes http, so HttpProviderTokenParam (the bearer token's SSM parameter) is required."}})
	for _, c := range RouteChannels {
		if slices.Contains(c.Providers, "http") {
			rule(c.Prefix+"HttpConfigured", c.contains(c.Via("http"), "      "), [][2]string{{
				fmt.Sprintf("!Or [!Not [!Equals [!Ref HttpProviderUrl, \"\"]], !Not [!Equals [!Ref HttpProviderUrl%s, \"\"]]]", c.Prefix),
				fmt.Sprintf("%s's route includes http, so HttpProviderUrl or HttpProviderUrl%s (a gateway of its own) is required.", c.Param, c.Prefix)}})
		}
	}
	for _, c := range RouteChannels {
		if slices.Contains(c.Providers, "lambda") {
			rule(c.Prefix+"LambdaConfigured", c.contains(c.Via("lambda"), "      "), [][2]string{{
				fmt.Sprintf("!Not [!Equals [!Ref %sLambdaArn, \"\"]]", c.Prefix),
				fmt.Sprintf("%s's route includes lambda, so %sLambdaArn (the function's ARN) is required.", c.Param, c.Prefix)}})
		}
	}
	for _, n := range providerNeeds {
		c, _ := RouteChannelOf(n.param)
		if slices.Contains(c.Providers, n.provider) {
			rule(n.rule, c.contains(c.Via(n.provider), "      "), n.asserts)
		}
	}
	b.WriteString(end("  ", RouteRulesBlock))
	out[RouteRulesBlock] = b.String()
	return out
}
