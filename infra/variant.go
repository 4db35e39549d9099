package infra

import (
	"bytes"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Variant describes a template made from another by fixing most of its
// parameters at their defaults: every parameter it does not keep becomes
// its default value wherever the source refers to it, and what that
// decides is decided in the output (conditions, the Fn::If they choose,
// the resources, outputs and Rules they hold or drop), so the variant
// declares only what it can deploy and asks only what it keeps.
type Variant struct {
	// Keep names the parameters the variant keeps, in the order it asks
	// for them, each with the values it may take: nil keeps the source's
	// constraint, a list replaces its AllowedValues (a value the source
	// allows whose settings the variant fixes cannot be offered).
	Keep []Kept
	// Fix sets parameters the variant does not keep to another value than
	// their default: a YAML value, such as !Sub "${AWS::StackName}-x" (its
	// conditions read a Fn::Sub as its text, which is not empty).
	Fix map[string]string
	// DropMetadata names Metadata keys the variant leaves out.
	DropMetadata []string
	// DropFunctionProperties names properties of AWS::Serverless::Function
	// the variant leaves out, in Globals and in every function;
	// DropResources names resources it leaves out (those only the dropped
	// properties used: a reference left to one is an error).
	DropFunctionProperties []string
	DropResources          []string
	// Header is the comment at the top of the variant (without "# ").
	Header []string
	// ParametersComment replaces the comment above Parameters.
	ParametersComment []string
}

// Kept is a parameter a Variant keeps, with the values it may take (nil:
// the source's).
type Kept struct {
	Name   string
	Values []string
	// Required drops the parameter's Default, so a value must be given
	// (and it is known not to be empty); Pattern and Description, when
	// set, replace the source's.
	Required    bool
	Pattern     string
	Description string
	// Label, when set, replaces the console's label.
	Label string
}

// The channel providers QuickStart and ServerlessRepo ask for: of the
// routes template.full.yaml offers, those whose providers need no setting
// they fix (a route with Twilio needs its account, a route of two needs a
// second provider's settings), which is one provider per channel
// (TestVariantsOfferEveryDeployableRoute).
var (
	smsProvider = Kept{Name: "SmsProvider", Values: []string{"sns", ""}, Label: "SMS provider",
		Description: "sns to send SMS through Amazon SNS, or empty to leave sms unconfigured (other providers, and routes such as twilio,sns, are template.full.yaml's)."}
	emailProvider = Kept{Name: "EmailProvider", Values: []string{"", "ses"}, Label: "Email provider",
		Description: "ses to send email through Amazon SES (with SesFrom), or empty to leave email unconfigured (other providers, and routes such as ses,smtp, are template.full.yaml's)."}
)

// firstQuestions are the questions QuickStart and ServerlessRepo both ask,
// in order, before their last one.
func firstQuestions() []Kept {
	return []Kept{smsProvider, {Name: "SnsOriginationNumber"}, emailProvider, {Name: "SesFrom"},
		{Name: "AlarmEmail"}, {Name: "AlarmTopicArn"}, {Name: "PermissionsBoundary"}}
}

// QuickStart is template.yaml, made from template.full.yaml: the eight
// answers (at most) a first deployment needs (`sam deploy --guided` asks
// for every parameter), AWS's own providers (SNS for SMS and push, SES
// for email), and every other setting at the default template.full.yaml
// documents. It is also what the Serverless Application Repository
// publishes.
var QuickStart = Variant{
	Keep:         append(firstQuestions(), Kept{Name: "DeploymentType"}),
	DropMetadata: []string{"AWS::ServerlessRepo::Application"}, // template.sar.yaml is what the repository publishes
	Header: []string{
		"GENERATED from template.full.yaml by `make template` (infra.QuickStart):",
		"do not edit; change template.full.yaml and run make template.",
		"",
		"The sendonce application as a first deployment and the Serverless",
		"Application Repository take it: the parameters below are all that",
		"`sam deploy --guided` asks (README, \"Deploying\"), and every other",
		"setting is template.full.yaml's default (docs/deploy.md, \"Tuning\").",
		"Deploy template.full.yaml instead to change one of them, to send",
		"through Twilio, SMTP or an HTTP gateway, or for a multi-Region ledger.",
	},
	ParametersComment: []string{
		"Every other parameter of template.full.yaml is fixed at its default,",
		"which holds every invariant between them (infra's tests prove it for",
		"template.full.yaml; the defaults are one of the combinations).",
	},
}

// ServerlessRepo is template.sar.yaml, made from template.full.yaml, which
// the Serverless Application Repository publishes: QuickStart's
// questions, declaring only resource types the repository accepts. The
// address-token key is an SSM SecureString the deployer creates first
// (CloudFormation creates no SecureString, and the generated Secrets
// Manager secret of the other templates is not a type on the repository's
// list), named in RedactKeyParam; with email through SES, the deployer
// creates the configuration set <stack name>-sendonce and its event
// destination (AWS::SES::* is not on the list either). Releases go
// live at once: CodeDeploy's types are not on the list, so the variant
// has no DeploymentPreference and no CodeDeploy role.
var ServerlessRepo = Variant{
	Keep: append(firstQuestions(),
		Kept{Name: "RedactKeyParam", Required: true, Pattern: `^/[a-zA-Z0-9_.\-/]+$`,
			Label:       "Address-token key (SSM SecureString)",
			Description: "The SSM SecureString (name starting with /) holding the address-token key, at least 32 bytes; create it first: aws ssm put-parameter --type SecureString --name /sendonce/NAME/redact-key --value \"$(openssl rand -hex 32)\"."}),
	Fix: map[string]string{"SesConfigurationSetName": `!Sub "${AWS::StackName}-sendonce"`},
	// CodeDeploy's types (AWS::CodeDeploy::Application, DeploymentGroup),
	// which DeploymentPreference makes, are not on the repository's list
	// (SARTypes): every version goes live at once behind the alias.
	DropFunctionProperties: []string{"DeploymentPreference"},
	DropResources:          []string{"CodeDeployRole", "CodeDeployPolicy"},
	Header: []string{
		"GENERATED from template.full.yaml by `make template` (infra.ServerlessRepo):",
		"do not edit; change template.full.yaml and run make template.",
		"",
		"The sendonce application as the Serverless Application Repository",
		"publishes it (docs/deploy.md, \"Publishing\"): template.yaml's questions,",
		"only resource types the repository accepts (so no CodeDeploy: a release",
		"goes live at once, without canary or rollback). Before deploying, create the",
		"SSM SecureString RedactKeyParam names; with email through SES, create",
		"the configuration set <stack name>-sendonce whose event destination",
		"publishes to the SesEventTopicArn output (README, \"Deploying\").",
	},
	ParametersComment: []string{
		"Every other parameter of template.full.yaml is fixed at its default",
		"(which holds every invariant between them), but for",
		"SesConfigurationSetName, fixed at <stack name>-sendonce, a configuration",
		"set the deployer creates.",
	},
}

// Generate returns the variant of the source template src.
func (v Variant) Generate(src []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("infra: variant: the template is not a mapping")
	}
	var t Template
	if err := longForm(&doc).Decode(&t); err != nil {
		return nil, err
	}
	g := &gen{v: v, root: doc.Content[0], src: &t, fixed: map[string]*yaml.Node{}, conds: map[string]tri{}, alias: map[string]string{}, dropped: map[string]bool{}}
	if err := g.run(); err != nil {
		return nil, err
	}
	doc.HeadComment = comment(v.Header)
	// A blank line before each top-level section and each resource and
	// output (and the comments above it), as a person writes a template:
	// the YAML encoder keeps none of the source's.
	root := doc.Content[0]
	for _, m := range []*yaml.Node{root, get(root, "Resources"), get(root, "Outputs")} {
		for i := 2; m != nil && i < len(m.Content); i += 2 {
			m.Content[i].HeadComment = "\n" + m.Content[i].HeadComment
		}
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	// The encoder indents blank lines; a variant is generated as a whole,
	// without the marker lines of template.full.yaml's generated blocks.
	return marker.ReplaceAll(blankLine.ReplaceAll(b.Bytes(), nil), nil), nil
}

func comment(lines []string) string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimRight("# "+l, " ")
	}
	return strings.Join(out, "\n")
}

// tri is a condition's value as far as the variant decides it.
type tri int

const (
	unknown tri = iota
	false_
	true_
)

func triOf(b bool) tri {
	if b {
		return true_
	}
	return false_
}

// gen makes a Variant; Template.Resolve walks a part of a template with
// one, every parameter fixed.
type gen struct {
	v       Variant
	root    *yaml.Node
	src     *Template             // the source, as the conditions are evaluated
	fixed   map[string]*yaml.Node // parameter → its value: the default (a scalar), or Fix's
	base    Values                // the fixed parameters' values, as conditions read them
	values  map[string][]string   // kept parameter → the values conditions may see (keptValues)
	conds   map[string]tri
	alias   map[string]string // condition → the one it equals, once simplified
	dropped map[string]bool   // resources dropped
	// resolve makes an Fn::Sub a string, its variables of literal value
	// filled in (Template.Resolve).
	resolve bool
}

// at returns the index of key in mapping m, -1 without it.
func at(m *yaml.Node, key string) int {
	for i := 0; m != nil && m.Kind == yaml.MappingNode && i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return i
		}
	}
	return -1
}

// get returns the value of key in mapping m, nil without it.
func get(m *yaml.Node, key string) *yaml.Node {
	if i := at(m, key); i >= 0 {
		return m.Content[i+1]
	}
	return nil
}

// text returns the scalar value of key in mapping m, "" without it.
func text(m *yaml.Node, key string) string {
	if v := get(m, key); v != nil {
		return v.Value
	}
	return ""
}

// set replaces the value of key in mapping m, if it has key.
func set(m *yaml.Node, key string, v *yaml.Node) {
	if i := at(m, key); i >= 0 {
		m.Content[i+1] = v
	}
}

func del(m *yaml.Node, key string) {
	if i := at(m, key); i >= 0 {
		m.Content = slices.Delete(m.Content, i, i+2)
	}
}

func (g *gen) run() error {
	params := get(g.root, "Parameters")
	if params == nil {
		return fmt.Errorf("infra: variant: no Parameters")
	}
	for _, k := range g.v.Keep {
		if get(params, k.Name) == nil {
			return fmt.Errorf("infra: variant: kept parameter %s is not a parameter", k.Name)
		}
	}
	for name, text := range g.v.Fix {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(text), &n); err != nil || len(n.Content) != 1 {
			return fmt.Errorf("infra: variant: Fix %s: %q is not a YAML value", name, text)
		}
		if get(params, name) == nil {
			return fmt.Errorf("infra: variant: Fix %s is not a parameter", name)
		}
		g.fixed[name] = n.Content[0]
	}
	for i := 0; i+1 < len(params.Content); i += 2 {
		name, p := params.Content[i].Value, params.Content[i+1]
		if g.fixed[name] != nil || slices.ContainsFunc(g.v.Keep, func(k Kept) bool { return k.Name == name }) {
			continue
		}
		d := get(p, "Default")
		if d == nil || d.Kind != yaml.ScalarNode {
			return fmt.Errorf("infra: variant: parameter %s has no default to fix it at", name)
		}
		g.fixed[name] = d
	}
	g.base = Values{} // a Fix's Fn::Sub at its text
	for name, f := range g.fixed {
		g.base[name] = f.Value
	}
	g.values = g.keptValues()
	// Conditions first: the rest asks for their values.
	conds := get(g.root, "Conditions")
	for i := 0; conds != nil && i+1 < len(conds.Content); i += 2 {
		name := conds.Content[i].Value
		t, err := g.condition(name)
		if err != nil {
			return err
		}
		if e := g.simplify(conds.Content[i+1]); t == unknown && e.Tag == "!Condition" {
			g.alias[name] = e.Value // a condition that equals another, once the variant decides
		}
	}
	if err := g.rules(); err != nil {
		return err
	}
	for _, section := range []string{"Resources", "Outputs"} {
		if err := g.entries(get(g.root, section)); err != nil {
			return fmt.Errorf("%s: %w", section, err)
		}
	}
	for _, section := range []string{"Globals", "Metadata"} {
		if n := get(g.root, section); n != nil {
			if _, err := g.walk(n, map[string]bool{}); err != nil {
				return fmt.Errorf("%s: %w", section, err)
			}
		}
	}
	if err := g.drop(); err != nil {
		return err
	}
	g.dependsOn()
	g.iface()
	for _, k := range g.v.DropMetadata {
		del(get(g.root, "Metadata"), k)
	}
	// Parameters: the kept ones take their values, the fixed ones go.
	for _, k := range g.v.Keep {
		name, vals, p := k.Name, k.Values, get(params, k.Name)
		if k.Required {
			del(p, "Default")
		}
		for prop, v := range map[string]string{"AllowedPattern": k.Pattern, "Description": k.Description} {
			if v == "" {
				continue
			}
			if get(p, prop) == nil {
				return fmt.Errorf("infra: variant: %s has no %s to replace", name, prop)
			}
			set(p, prop, &yaml.Node{Kind: yaml.ScalarNode, Value: v})
		}
		if k.Label != "" {
			l := get(get(get(get(g.root, "Metadata"), "AWS::CloudFormation::Interface"), "ParameterLabels"), name)
			set(l, "default", &yaml.Node{Kind: yaml.ScalarNode, Value: k.Label, Style: yaml.DoubleQuotedStyle})
		}
		if vals == nil {
			continue
		}
		if d := text(p, "Default"); !slices.Contains(vals, d) {
			return fmt.Errorf("infra: variant: %s's default %q is not among its values %q", name, d, vals)
		}
		list := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, val := range vals {
			list.Content = append(list.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: val, Style: yaml.DoubleQuotedStyle})
		}
		switch {
		case get(p, "AllowedValues") != nil:
		case get(p, "AllowedPattern") != nil:
			// An enumerated pattern (a route's) becomes the list of the
			// values kept, each of which it must match.
			re, err := regexp.Compile(get(p, "AllowedPattern").Value)
			if err != nil {
				return fmt.Errorf("infra: variant: %s's AllowedPattern: %w", name, err)
			}
			for _, val := range vals {
				if !re.MatchString(val) {
					return fmt.Errorf("infra: variant: %s's value %q does not match its AllowedPattern", name, val)
				}
			}
			p.Content[at(p, "AllowedPattern")].Value = "AllowedValues"
			del(p, "ConstraintDescription")
		default:
			return fmt.Errorf("infra: variant: %s has neither AllowedValues nor AllowedPattern to restrict", name)
		}
		set(p, "AllowedValues", list)
	}
	var ordered []*yaml.Node
	for _, k := range g.v.Keep {
		i := at(params, k.Name)
		params.Content[i].HeadComment = ""
		ordered = append(ordered, params.Content[i], params.Content[i+1])
	}
	params.Content = ordered
	g.root.Content[at(g.root, "Parameters")].HeadComment = comment(g.v.ParametersComment)
	// Conditions the variant decides, or that equal another, are gone; the
	// others are simplified.
	if conds != nil {
		for i := 0; i+1 < len(conds.Content); {
			name := conds.Content[i].Value
			if g.conds[name] != unknown || g.alias[name] != "" {
				conds.Content = slices.Delete(conds.Content, i, i+2)
				continue
			}
			conds.Content[i+1] = g.simplify(conds.Content[i+1])
			i += 2
		}
	}
	return nil
}

// cond returns the condition a name stands for in the variant.
func (g *gen) cond(name string) string {
	for i := 0; i < maxDepth && g.alias[name] != ""; i++ {
		name = g.alias[name]
	}
	return name
}

// condition returns the value of the named condition.
func (g *gen) condition(name string) (tri, error) {
	if t, ok := g.conds[name]; ok {
		return t, nil
	}
	t, err := g.decide(map[string]any{"Condition": name})
	if err != nil {
		return unknown, fmt.Errorf("condition %s: %w", name, err)
	}
	g.conds[name] = t
	return t, nil
}

// eval returns the value of condition or Rule expression n.
func (g *gen) eval(n *yaml.Node) (tri, error) {
	var v any
	if err := longForm(n).Decode(&v); err != nil {
		return unknown, err
	}
	return g.decide(v)
}

// decide returns the value of expression v (in long form) in every
// combination of the values the kept parameters it tests may take:
// unknown when they differ.
func (g *gen) decide(v any) (tri, error) {
	tests := map[string]map[string]bool{}
	g.compared(v, tests, 0)
	combos := []Values{g.base}
	for _, k := range g.v.Keep {
		if tests[k.Name] != nil {
			combos = expand(combos, k.Name, g.values[k.Name])
		}
	}
	out := unknown
	for i, p := range combos {
		b, err := (&eval{t: g.src, p: p}).cond(v)
		if err != nil {
			return unknown, err
		}
		if i > 0 && triOf(b) != out {
			return unknown, nil
		}
		out = triOf(b)
	}
	return out, nil
}

// keptValues returns the values each kept parameter may take: its
// Kept.Values, else the source's AllowedValues, else "" unless Required,
// any literal a condition or Rule compares it with, and a value none does.
func (g *gen) keptValues() map[string][]string {
	compared := map[string]map[string]bool{}
	g.compared(g.src.Conditions, compared, 0)
	for _, r := range g.src.Rules {
		g.compared(map[string]any(r), compared, 0)
	}
	out := map[string][]string{}
	for _, k := range g.v.Keep {
		vals := k.Values
		switch {
		case vals != nil:
		case g.src.Parameters[k.Name]["AllowedValues"] != nil:
			vals = g.src.Extremes(k.Name)
		default:
			vals = append(slices.Collect(maps.Keys(compared[k.Name])), "", "(what no condition names)")
			if k.Required {
				vals = slices.DeleteFunc(vals, func(v string) bool { return v == "" })
			}
		}
		out[k.Name] = vals
	}
	return out
}

// compared adds to out, for each parameter an Fn::Equals or Fn::Contains
// of v, or of a condition it names, tests (the only parameters a
// condition reads), the literals it is tested against.
func (g *gen) compared(v any, out map[string]map[string]bool, depth int) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			g.compared(e, out, depth)
		}
	case map[string]any:
		if c, ok := x["Condition"].(string); ok && depth < maxDepth {
			g.compared(g.src.Conditions[c], out, depth+1)
		}
		for fn, arg := range x {
			args, _ := arg.([]any)
			for _, ref := range args {
				if name := refName(ref); name != "" && (fn == "Fn::Equals" || fn == "Fn::Contains") {
					if out[name] == nil {
						out[name] = map[string]bool{}
					}
					for _, lit := range flattenIf(args) {
						if s, ok := scalar(lit); ok {
							out[name][s] = true
						}
					}
				}
			}
			g.compared(arg, out, depth)
		}
	}
}

// simplify returns expression n (a condition or Rule assertion of
// undecided value) without its decided parts (walk). It has no Fn::If or
// Fn::Sub, which are walk's only errors.
func (g *gen) simplify(n *yaml.Node) *yaml.Node {
	r, _ := g.walk(n, map[string]bool{})
	return r
}

// literal returns a copy of a parameter's value: its default as a plain
// scalar, or the Fn::Sub a Variant fixes it at.
func literal(d *yaml.Node) *yaml.Node {
	if intrinsic(d) {
		c := *d
		return &c
	}
	l := &yaml.Node{Kind: yaml.ScalarNode, Value: d.Value, Style: d.Style, Tag: d.Tag}
	if l.Value == "" || l.Style == 0 && (l.Value == "true" || l.Value == "false") {
		l.Style = yaml.DoubleQuotedStyle
	}
	return l
}

// rules decides every Rule: one whose condition is false, or whose every
// assertion holds, goes; an assertion the variant breaks is an error.
func (g *gen) rules() error {
	rules := get(g.root, "Rules")
	if rules == nil {
		return nil
	}
	for i := 0; i+1 < len(rules.Content); {
		name, r := rules.Content[i].Value, rules.Content[i+1]
		drop := false
		if c := get(r, "RuleCondition"); c != nil {
			t, err := g.eval(c)
			if err != nil {
				return fmt.Errorf("rule %s: %w", name, err)
			}
			switch t {
			case false_:
				drop = true
			case true_:
				del(r, "RuleCondition")
			default:
				set(r, "RuleCondition", g.simplify(c))
			}
		}
		asserts := get(r, "Assertions")
		if !drop && asserts != nil {
			var kept []*yaml.Node
			for _, a := range asserts.Content {
				expr := get(a, "Assert")
				t, err := g.eval(expr)
				if err != nil {
					return fmt.Errorf("rule %s: %w", name, err)
				}
				switch t {
				case false_:
					return fmt.Errorf("infra: variant: rule %s rejects the variant's fixed values (%s): restrict a kept parameter's values", name, get(a, "AssertDescription").Value)
				case unknown:
					set(a, "Assert", g.simplify(expr))
					kept = append(kept, a)
				}
			}
			asserts.Content = kept
			drop = len(kept) == 0
		}
		if drop {
			rules.Content = slices.Delete(rules.Content, i, i+2)
			continue
		}
		i += 2
	}
	if len(rules.Content) == 0 {
		del(g.root, "Rules")
	}
	return nil
}

// entries decides the resources or outputs under a condition.
func (g *gen) entries(m *yaml.Node) error {
	if m == nil {
		return nil
	}
	for i := 0; i+1 < len(m.Content); {
		name, e := m.Content[i].Value, m.Content[i+1]
		ctx := map[string]bool{}
		if c := get(e, "Condition"); c != nil {
			t, err := g.condition(c.Value)
			if err != nil {
				return err
			}
			switch t {
			case false_:
				g.dropped[name] = true
				m.Content = slices.Delete(m.Content, i, i+2)
				continue
			case true_:
				del(e, "Condition")
			default:
				c.Value = g.cond(c.Value)
				ctx[c.Value] = true
			}
		}
		if _, err := g.walk(e, ctx); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		i += 2
	}
	return nil
}

// drop leaves out the variant's DropFunctionProperties and
// DropResources, and fails when something still names a dropped resource
// (!Ref, !GetAtt, or ${Name} in a !Sub).
func (g *gen) drop() error {
	for _, prop := range g.v.DropFunctionProperties {
		del(get(get(g.root, "Globals"), "Function"), prop)
		res := get(g.root, "Resources")
		for i := 0; res != nil && i+1 < len(res.Content); i += 2 {
			if text(res.Content[i+1], "Type") == "AWS::Serverless::Function" {
				del(get(res.Content[i+1], "Properties"), prop)
			}
		}
	}
	res := get(g.root, "Resources")
	for _, name := range g.v.DropResources {
		if get(res, name) == nil {
			return fmt.Errorf("infra: variant: DropResources %s is not a resource", name)
		}
		del(res, name)
		g.dropped[name] = true
	}
	var still []string
	var find func(n *yaml.Node)
	find = func(n *yaml.Node) {
		for name := range g.dropped {
			switch {
			case n.Kind != yaml.ScalarNode:
			case n.Tag == "!Ref" && n.Value == name, n.Tag == "!GetAtt" && strings.HasPrefix(n.Value, name+"."),
				n.Tag == "!Sub" && (strings.Contains(n.Value, "${"+name+"}") || strings.Contains(n.Value, "${"+name+".")):
				still = append(still, name)
			}
		}
		if n.Tag == "!GetAtt" && n.Kind == yaml.SequenceNode && len(n.Content) > 0 && g.dropped[n.Content[0].Value] {
			still = append(still, n.Content[0].Value)
		}
		for _, c := range n.Content {
			find(c)
		}
	}
	if len(g.v.DropResources) > 0 {
		for _, section := range []string{"Globals", "Resources", "Outputs"} {
			if n := get(g.root, section); n != nil {
				find(n)
			}
		}
	}
	if len(still) > 0 {
		slices.Sort(still)
		return fmt.Errorf("infra: variant: dropped resources still named: %v", slices.Compact(still))
	}
	return nil
}

// noValue reports whether n is !Ref AWS::NoValue.
func noValue(n *yaml.Node) bool { return n.Tag == "!Ref" && n.Value == "AWS::NoValue" }

var (
	// blankLine matches the spaces of a line of nothing else.
	blankLine = regexp.MustCompile(`(?m)^ +$`)
	// marker matches the line of a generated block's marker (beginMarker,
	// endMarker).
	marker = regexp.MustCompile(`(?m)^ *# (BEGIN|END) generated .*\n`)
)

// subVar matches a ${Name} of a Fn::Sub string.
var subVar = regexp.MustCompile(`\$\{([A-Za-z0-9:.]+)\}`)

// walk rewrites n in place (it returns n's replacement): a decided Fn::If
// becomes the branch it chooses, a fixed parameter's Ref its value, a
// Fn::Sub string the text with fixed parameters filled in (a plain string
// when nothing is left to substitute), what becomes AWS::NoValue leaves
// its mapping or list; in a condition, an And drops what is true, an Or
// what is false, a Condition names what it stands for, a list a kept
// parameter is tested against keeps the values it may take.
//
// ctx holds the conditions known where n is (the Condition of the
// resource it is in, the branches of the Fn::If around it): a Fn::If on
// one of them is decided too.
func (g *gen) walk(n *yaml.Node, ctx map[string]bool) (*yaml.Node, error) {
	switch n.Tag {
	case "!If":
		if len(n.Content) != 3 {
			return nil, fmt.Errorf("%w: Fn::If with %d arguments", ErrUnresolved, len(n.Content))
		}
		t, err := g.condition(n.Content[0].Value)
		if err != nil {
			return nil, err
		}
		c := g.cond(n.Content[0].Value)
		if v, known := ctx[c]; known && t == unknown {
			t = triOf(v)
		}
		switch t {
		case true_:
			return g.walk(n.Content[1], ctx)
		case false_:
			return g.walk(n.Content[2], ctx)
		}
		n.Content[0].Value = c
		for i := 1; i < 3; i++ {
			inner := maps.Clone(ctx)
			inner[c] = i == 1
			r, err := g.walk(n.Content[i], inner)
			if err != nil {
				return nil, err
			}
			n.Content[i] = r
		}
		return n, nil
	case "!Ref":
		if d, ok := g.fixed[n.Value]; ok {
			return literal(d), nil
		}
		return n, nil
	case "!Sub":
		return g.sub(n, ctx)
	case "!Condition":
		n.Value = g.cond(n.Value)
		return n, nil
	case "!And", "!Or":
		var kept []*yaml.Node
		for _, c := range n.Content {
			if t, _ := g.eval(c); t == triOf(n.Tag == "!And") {
				continue // an And drops what is true, an Or what is false
			}
			r, err := g.walk(c, ctx)
			if err != nil {
				return nil, err
			}
			kept = append(kept, r)
		}
		if len(kept) == 1 {
			return kept[0], nil
		}
		n.Content = kept
		return n, nil
	case "!Contains":
		// Of a list a kept parameter is tested against, only the values
		// it may take are left; one is an Equals.
		if len(n.Content) == 2 && n.Content[1].Tag == "!Ref" && g.values[n.Content[1].Value] != nil {
			vals := g.values[n.Content[1].Value]
			list := n.Content[0]
			list.Content = slices.DeleteFunc(list.Content, func(c *yaml.Node) bool { return !slices.Contains(vals, c.Value) })
			if len(list.Content) == 1 {
				return &yaml.Node{Kind: yaml.SequenceNode, Tag: "!Equals", Style: yaml.FlowStyle, Content: []*yaml.Node{n.Content[1], list.Content[0]}}, nil
			}
			return n, nil
		}
	}
	// The values of a mapping (every second node, from the second) or the
	// items of a list.
	step := 1
	if n.Kind == yaml.MappingNode {
		step = 2
	}
	for i := step - 1; i < len(n.Content); {
		r, err := g.walk(n.Content[i], ctx)
		if err != nil {
			return nil, err
		}
		if noValue(r) {
			n.Content = slices.Delete(n.Content, i+1-step, i+1) // with its key
			continue
		}
		n.Content[i] = r
		i += step
	}
	return n, nil
}

func (g *gen) sub(n *yaml.Node, ctx map[string]bool) (*yaml.Node, error) {
	str, vars := n, (*yaml.Node)(nil)
	if n.Kind == yaml.SequenceNode {
		if len(n.Content) != 2 {
			return nil, fmt.Errorf("%w: Fn::Sub with %d arguments", ErrUnresolved, len(n.Content))
		}
		str, vars = n.Content[0], n.Content[1]
		if _, err := g.walk(vars, ctx); err != nil {
			return nil, err
		}
	}
	text := subVar.ReplaceAllStringFunc(str.Value, func(m string) string {
		name := m[2 : len(m)-1]
		if v := get(vars, name); v != nil {
			if g.resolve && v.Kind == yaml.ScalarNode && !intrinsic(v) {
				return v.Value
			}
			return m
		}
		if d, ok := g.fixed[name]; ok && (d.Tag == "" || d.Tag == "!Sub" || strings.HasPrefix(d.Tag, "!!")) && d.Kind == yaml.ScalarNode {
			return d.Value
		}
		return m
	})
	if g.resolve || vars == nil && !strings.Contains(text, "${") {
		return literal(&yaml.Node{Value: text, Style: yaml.DoubleQuotedStyle}), nil
	}
	str.Value = text
	return n, nil
}

// dependsOn drops dropped resources from every DependsOn.
func (g *gen) dependsOn() {
	res := get(g.root, "Resources")
	for i := 1; i < len(res.Content); i += 2 {
		d := get(res.Content[i], "DependsOn")
		switch {
		case d == nil:
		case d.Kind == yaml.ScalarNode && g.dropped[d.Value]:
			del(res.Content[i], "DependsOn")
		case d.Kind == yaml.SequenceNode:
			d.Content = slices.DeleteFunc(d.Content, func(c *yaml.Node) bool { return g.dropped[c.Value] })
		}
	}
}

// iface keeps the kept parameters in the console's groups and labels.
func (g *gen) iface() {
	i := get(get(g.root, "Metadata"), "AWS::CloudFormation::Interface")
	if i == nil {
		return
	}
	if groups := get(i, "ParameterGroups"); groups != nil {
		groups.Content = slices.DeleteFunc(groups.Content, func(grp *yaml.Node) bool {
			ps := get(grp, "Parameters")
			ps.Content = slices.DeleteFunc(ps.Content, func(p *yaml.Node) bool { return g.fixed[p.Value] != nil })
			return len(ps.Content) == 0
		})
	}
	if labels := get(i, "ParameterLabels"); labels != nil {
		for name := range g.fixed {
			del(labels, name)
		}
	}
}
