package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/jmespath/go-jmespath"
	"go.yaml.in/yaml/v3"
)

// The output formats (--output), the same in every command:
//
//   - json: one indented object for one result; one compact object per
//     line for a list (jq reads both);
//   - table: "field: value" lines for one result; aligned columns under a
//     header for a list;
//   - text: "field<TAB>value" lines for one result; a list's columns,
//     tab-separated, without the header (cut and awk read it);
//   - yaml: the JSON document as YAML, as the AWS CLI's yaml output: one
//     mapping for one result, a sequence of mappings for a list.
//
// With --query the result (a list as a JSON array) goes through the
// JMESPath expression first, and what it selects is printed as one JSON
// document (json), or in text or table form (see writeValue).

// printer prints one command's result in the run's format.
type printer struct {
	w      io.Writer
	format string
	query  *jmespath.JMESPath
}

func (a *app) printer() printer { return printer{w: a.stdout, format: a.format, query: a.jq} }

// object prints one result.
func (p printer) object(v any) error {
	if p.query != nil {
		return p.queried(v)
	}
	switch p.format {
	case "json":
		return writeJSON(p.w, v, true)
	case "yaml":
		return writeYAML(p.w, v)
	case "text":
		var b strings.Builder
		for _, f := range fields(v) {
			fmt.Fprintf(&b, "%s\t%s\n", f[0], oneLine(f[1]))
		}
		_, err := io.WriteString(p.w, b.String())
		return err
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	for _, f := range fields(v) {
		// A value of several lines (a template's text) keeps them,
		// each under the first.
		lines := strings.Split(strings.TrimRight(f[1], "\n"), "\n")
		fmt.Fprintf(tw, "%s:\t%s\n", f[0], lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(tw, "\t%s\n", l)
		}
	}
	return tw.Flush()
}

// writeList prints rows: JSON lines, or the columns that cell gives for
// each row under header (table), or without it (text).
func writeList[T any](p printer, rows []T, header []string, cell func(T) []string) error {
	if p.query != nil {
		if rows == nil {
			rows = []T{} // [] for the query, not null
		}
		return p.queried(rows)
	}
	if p.format == "yaml" {
		if rows == nil {
			rows = []T{}
		}
		return writeYAML(p.w, rows)
	}
	if p.format == "json" {
		for _, r := range rows {
			if err := writeJSON(p.w, r, false); err != nil {
				return err
			}
		}
		return nil
	}
	cells := make([][]string, 0, len(rows))
	for _, r := range rows {
		cells = append(cells, cell(r))
	}
	return writeRows(p.w, p.format, header, cells)
}

// writeRows prints rows of cells: aligned under header (table, an empty
// cell shown as "-") or tab-separated (text). Whitespace inside a cell
// is flattened to single spaces, so a row stays one line.
func writeRows(w io.Writer, format string, header []string, rows [][]string) error {
	if format == "text" {
		var b strings.Builder
		for _, r := range rows {
			for i, c := range r {
				r[i] = oneLine(c)
			}
			b.WriteString(strings.Join(r, "\t") + "\n")
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if header != nil {
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	for _, r := range rows {
		for i, c := range r {
			if r[i] = oneLine(c); r[i] == "" {
				r[i] = "-"
			}
		}
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func writeJSON(w io.Writer, v any, indent bool) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	return nil
}

// writeYAML prints v as YAML: its JSON document (field names, their order
// and omissions as in json) in YAML's block style.
func writeYAML(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	// JSON is YAML: decoded into a node, it keeps its keys' order.
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	blockStyle(&doc)
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	return enc.Close()
}

// blockStyle drops the JSON (flow, quoted) style of n and its children,
// so that the encoder writes block style and quotes only where YAML
// needs it.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// compileQuery compiles a --query expression. The parser panics on some
// malformed input (an unquoted identifier followed by U+0080,
// jmespath/go-jmespath#101): that is a syntax error too.
func compileQuery(expr string) (q *jmespath.JMESPath, err error) {
	defer func() {
		if r := recover(); r != nil {
			q, err = nil, fmt.Errorf("--query %q: not a JMESPath expression", expr)
		}
	}()
	q, err = jmespath.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("--query %q: %s", expr, oneLine(err.Error()))
	}
	return q, nil
}

// queried prints what the query selects from v's JSON form.
func (p printer) queried(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("decode output: %w", err)
	}
	got, err := search(p.query, doc)
	if err != nil {
		return fmt.Errorf("--query: %s", oneLine(err.Error()))
	}
	return writeValue(p.w, p.format, got)
}

func search(q *jmespath.JMESPath, doc any) (got any, err error) {
	defer func() {
		if r := recover(); r != nil {
			got, err = nil, fmt.Errorf("%v", r)
		}
	}()
	return q.Search(doc)
}

// writeValue prints a query's result, any JSON value:
//
//   - json: one indented document;
//   - text: a string as it is (several lines stay several lines), a
//     number or boolean as JSON, null as nothing; an array one element a
//     line (an object's values tab-separated, in key order); an object
//     "key<TAB>value" lines in key order;
//   - table: as text, except that an array of objects is aligned columns
//     under a header of their keys, and an object "key: value" lines.
//
// Values nested deeper are compact JSON.
func writeValue(w io.Writer, format string, v any) error {
	switch format {
	case "json":
		return writeJSON(w, v, true)
	case "yaml":
		return writeYAML(w, v)
	}
	switch v := v.(type) {
	case nil:
		return nil
	case map[string]any:
		rows := make([][]string, 0, len(v))
		for _, k := range slices.Sorted(maps.Keys(v)) {
			rows = append(rows, []string{k, scalar(v[k])})
		}
		if format == "table" {
			for _, r := range rows {
				r[0] += ":"
			}
		}
		return writeRows(w, format, nil, rows)
	case []any:
		var objects []map[string]any
		for _, e := range v {
			if m, ok := e.(map[string]any); ok {
				objects = append(objects, m)
			}
		}
		if format == "table" && len(v) > 0 && len(objects) == len(v) {
			keys := map[string]bool{}
			for _, m := range objects {
				for k := range m {
					keys[k] = true
				}
			}
			cols := slices.Sorted(maps.Keys(keys))
			header := make([]string, len(cols))
			for i, c := range cols {
				header[i] = strings.ToUpper(c)
			}
			rows := make([][]string, len(objects))
			for i, m := range objects {
				for _, c := range cols {
					rows[i] = append(rows[i], scalar(m[c]))
				}
			}
			return writeRows(w, format, header, rows)
		}
		rows := make([][]string, len(v))
		for i, e := range v {
			switch e := e.(type) {
			case map[string]any:
				for _, k := range slices.Sorted(maps.Keys(e)) {
					rows[i] = append(rows[i], scalar(e[k]))
				}
			case []any:
				for _, x := range e {
					rows[i] = append(rows[i], scalar(x))
				}
			default:
				rows[i] = []string{scalar(e)}
			}
		}
		return writeRows(w, "text", nil, rows)
	}
	_, err := fmt.Fprintln(w, scalar(v))
	return err
}

// scalar is a JSON value as text: a string as it is, null as nothing,
// anything else as compact JSON.
func scalar(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// fields lists v's exported struct fields (embedded structs flattened) as
// their JSON names and values, leaving out empty ones tagged omitempty.
func fields(v any) [][2]string {
	var out [][2]string
	rv := reflect.Indirect(reflect.ValueOf(v))
	if rv.Kind() != reflect.Struct {
		return [][2]string{{"value", fmt.Sprint(v)}}
	}
	for i := range rv.NumField() {
		f, fv := rv.Type().Field(i), rv.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Anonymous && fv.Kind() == reflect.Struct {
			out = append(out, fields(fv.Interface())...)
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if strings.Contains(opts, "omitempty") && fv.IsZero() {
			continue
		}
		if fv.Kind() == reflect.Pointer && !fv.IsNil() {
			fv = fv.Elem() // an optional value: the value, not its address
		}
		out = append(out, [2]string{name, fmt.Sprint(fv.Interface())})
	}
	return out
}
