package main

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"
)

// writeObject prints one object: indented JSON, or "field: value" lines
// (the JSON names, empty fields left out) for table.
func writeObject(w io.Writer, format string, v any) error {
	if format == "json" {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("encode output: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range fields(v) {
		fmt.Fprintf(tw, "%s:\t%s\n", f[0], f[1])
	}
	return tw.Flush()
}

// writeList prints rows: one JSON object per line, or aligned columns
// under header for table (cells from cell, tabs and newlines flattened).
func writeList[T any](w io.Writer, format string, rows []T, header []string, cell func(T) []string) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return fmt.Errorf("encode output: %w", err)
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		cells := cell(r)
		for i, c := range cells {
			cells[i] = strings.Join(strings.Fields(c), " ")
			if cells[i] == "" {
				cells[i] = "-"
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
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
		out = append(out, [2]string{name, fmt.Sprint(fv.Interface())})
	}
	return out
}
