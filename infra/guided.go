package infra

import (
	"cmp"
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// SAMCLISource is the SAM CLI code GuidedPrompts follows.
const SAMCLISource = "aws/aws-sam-cli fe8f8db (2026-07-22): samcli/commands/deploy/guided_context.py (GuidedContext.guided_prompts, prompt_parameters, prompt_authorization), samcli/commands/deploy/auth_utils.py, samcli/commands/deploy/deploy_context.py (the change set confirmation)"

// Prompt is one question `sam deploy --guided` asks.
type Prompt struct {
	// Text is the line as the SAM CLI prints it (click's prompt or
	// confirm: the question, its default in brackets, a colon).
	Text string
	// Parameter names the template parameter it asks for ("" for the SAM
	// CLI's own questions).
	Parameter string
	// Note is the comment line the SAM CLI prints before it, if any.
	Note string
}

// SAMConfig is what GuidedPrompts reads of samconfig.toml's default
// environment: the stack name, the deploy parameter overrides (the
// defaults it offers) and whether change sets are confirmed.
type SAMConfig struct {
	StackName          string
	ParameterOverrides map[string]string
	ConfirmChangeset   bool
}

var (
	tomlString    = regexp.MustCompile(`^\s*([a-z_]+)\s*=\s*"((?:[^"\\]|\\.)*)"\s*$`)
	tomlBool      = regexp.MustCompile(`^\s*([a-z_]+)\s*=\s*(true|false)\s*$`)
	tomlSection   = regexp.MustCompile(`^\[([a-z_.]+)\]\s*$`)
	overrideToken = regexp.MustCompile(`([A-Za-z0-9]+)=(?:"((?:[^"\\]|\\.)*)"|(\S*))`)
)

// ParseSAMConfig reads the default environment of a samconfig.toml (the
// few keys GuidedPrompts needs; not a TOML parser).
func ParseSAMConfig(data []byte) SAMConfig {
	c := SAMConfig{ParameterOverrides: map[string]string{}}
	section := ""
	for line := range strings.Lines(string(data)) {
		if m := tomlSection.FindStringSubmatch(line); m != nil {
			section = m[1]
		} else if section != "default.global.parameters" && section != "default.deploy.parameters" {
			continue
		} else if kv := tomlString.FindStringSubmatch(line); kv != nil {
			v := strings.ReplaceAll(kv[2], `\"`, `"`)
			switch kv[1] {
			case "stack_name":
				c.StackName = v
			case "parameter_overrides":
				for _, o := range overrideToken.FindAllStringSubmatch(v, -1) {
					c.ParameterOverrides[o[1]] = o[2] + o[3]
				}
			}
		} else if kv := tomlBool.FindStringSubmatch(line); kv != nil && kv[1] == "confirm_changeset" {
			c.ConfirmChangeset = kv[2] == "true"
		}
	}
	return c
}

// GuidedPrompts returns, in order, every question `sam deploy --guided`
// asks for the SAM template (YAML) with samconfig's defaults and region
// as the default AWS Region, as the SAM CLI source SAMCLISource words
// them: the stack name and Region; one "Parameter X" per template
// parameter, in the template's order, offering samconfig's override or
// the parameter's Default (a NoEcho parameter hides its input and offers
// none); the change set, IAM and rollback confirmations; one "has no
// authentication" confirmation per Api or HttpApi event of a function
// whose API has no Auth, and per Function URL with AuthType NONE (their
// default is no, which stops the deployment); where to save the answers;
// and, when change sets are confirmed, the confirmation of the change set.
func GuidedPrompts(template []byte, cfg SAMConfig, region string) ([]Prompt, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(template, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) != 1 {
		return nil, fmt.Errorf("infra: guided prompts: not a template")
	}
	root := doc.Content[0]
	prompt := func(text, def string) string { return fmt.Sprintf("%s [%s]:", text, def) }
	confirm := func(text string, def bool) string {
		if def {
			return text + " [Y/n]:"
		}
		return text + " [y/N]:"
	}
	stack := cfg.StackName
	if stack == "" {
		stack = "sam-app"
	}
	out := []Prompt{{Text: prompt("Stack Name", stack)}, {Text: prompt("AWS Region", region)}}
	params := get(root, "Parameters")
	for i := 0; params != nil && i+1 < len(params.Content); i += 2 {
		name, p := params.Content[i].Value, params.Content[i+1]
		if text(p, "NoEcho") == "true" {
			out = append(out, Prompt{Text: "Parameter " + name + ":", Parameter: name})
			continue
		}
		// An empty override is falsy: the Default shows.
		out = append(out, Prompt{Text: prompt("Parameter "+name, cmp.Or(cfg.ParameterOverrides[name], text(p, "Default"))), Parameter: name})
	}
	out = append(out,
		Prompt{Text: confirm("Confirm changes before deploy", cfg.ConfirmChangeset), Note: "#Shows you resources changes to be deployed and require a 'Y' to initiate deploy"},
		Prompt{Text: confirm("Allow SAM CLI IAM role creation", true), Note: "#SAM needs permission to be able to create roles to connect to the resources in your template"},
		Prompt{Text: confirm("Disable rollback", false), Note: "#Preserves the state of previously provisioned resources when an operation fails"},
	)
	res := get(root, "Resources")
	for i := 0; res != nil && i+1 < len(res.Content); i += 2 {
		name, r := res.Content[i].Value, res.Content[i+1]
		if text(r, "Type") != "AWS::Serverless::Function" {
			continue
		}
		props := get(r, "Properties")
		events := get(props, "Events")
		for j := 0; events != nil && j+1 < len(events.Content); j += 2 {
			ev := events.Content[j+1]
			typ := text(ev, "Type")
			if typ != "Api" && typ != "HttpApi" {
				continue
			}
			ep := get(ev, "Properties")
			auth, err := apiHasAuth(res, ep, typ)
			if err != nil {
				return nil, fmt.Errorf("infra: guided prompts: %s: %w", name, err)
			}
			if get(ep, "Auth") != nil || auth {
				continue
			}
			out = append(out, Prompt{Text: confirm(name+" has no authentication. Is this okay?", false)})
		}
		if text(get(props, "FunctionUrlConfig"), "AuthType") == "NONE" {
			out = append(out, Prompt{Text: confirm(name+" Function Url has no authentication. Is this okay?", false)})
		}
	}
	out = append(out,
		Prompt{Text: confirm("Save arguments to configuration file", true)},
		Prompt{Text: prompt("SAM configuration file", "samconfig.toml")},
		Prompt{Text: prompt("SAM configuration environment", "default")},
	)
	if cfg.ConfirmChangeset {
		out = append(out, Prompt{Text: confirm("Deploy this changeset?", false)})
	}
	return out, nil
}

// apiHasAuth reports whether the API an event's ApiId (HttpApi) or
// RestApiId (Api) names has an Auth, or is a plain API Gateway resource
// (which the SAM CLI does not check). An API with an OpenAPI definition
// is an error: the SAM CLI looks for security schemes in it, which this
// does not model.
func apiHasAuth(res, eventProps *yaml.Node, typ string) (bool, error) {
	key := "ApiId"
	if typ == "Api" {
		key = "RestApiId"
	}
	ref := get(eventProps, key)
	if ref == nil || ref.Tag != "!Ref" {
		return false, nil // the implicit API: no Auth
	}
	api := get(res, ref.Value)
	if t := text(api, "Type"); t == "AWS::ApiGateway::RestApi" || t == "AWS::ApiGatewayV2::Api" {
		return true, nil
	}
	p := get(api, "Properties")
	if get(p, "DefinitionBody") != nil || get(p, "DefinitionUri") != nil {
		return false, fmt.Errorf("API %s has an OpenAPI definition, whose security schemes GuidedPrompts does not read", ref.Value)
	}
	return get(p, "Auth") != nil, nil
}
