package metrics

import (
	"errors"
	"fmt"
)

// Validate checks that doc, one decoded JSON log line, is a well-formed
// EMF document: an _aws block with a Timestamp and CloudWatchMetrics
// directives, each naming a namespace, dimension sets whose keys are
// present as strings, and metrics whose values are present as numbers (or
// arrays of numbers). Tests use it to check the functions' log output.
func Validate(doc map[string]any) error {
	meta, ok := doc["_aws"].(map[string]any)
	if !ok {
		return errors.New("emf: no _aws object")
	}
	if _, ok := meta["Timestamp"].(float64); !ok {
		return errors.New("emf: _aws.Timestamp is not a number")
	}
	dirs, ok := meta["CloudWatchMetrics"].([]any)
	if !ok || len(dirs) == 0 {
		return errors.New("emf: _aws.CloudWatchMetrics is empty")
	}
	for _, d := range dirs {
		dir, ok := d.(map[string]any)
		if !ok {
			return errors.New("emf: a directive is not an object")
		}
		if ns, _ := dir["Namespace"].(string); ns == "" {
			return errors.New("emf: directive without Namespace")
		}
		sets, _ := dir["Dimensions"].([]any)
		for _, s := range sets {
			keys, _ := s.([]any)
			for _, k := range keys {
				name, _ := k.(string)
				if _, ok := doc[name].(string); !ok {
					return fmt.Errorf("emf: dimension %q has no string value", name)
				}
			}
		}
		ms, _ := dir["Metrics"].([]any)
		if len(ms) == 0 {
			return errors.New("emf: directive without Metrics")
		}
		for _, m := range ms {
			mm, _ := m.(map[string]any)
			name, _ := mm["Name"].(string)
			switch v := doc[name].(type) {
			case float64:
			case []any:
				for _, x := range v {
					if _, ok := x.(float64); !ok {
						return fmt.Errorf("emf: metric %q has a non-number sample", name)
					}
				}
			default:
				return fmt.Errorf("emf: metric %q has no numeric value", name)
			}
		}
	}
	return nil
}
