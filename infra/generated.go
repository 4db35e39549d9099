package infra

import (
	"fmt"
	"strings"
)

// template.full.yaml holds parts that are worked out rather than written
// (RedeliveryRule, RouteBlocks): each between a line
// "# BEGIN generated NAME by `make template` ..." and a line
// "# END generated NAME", which make template rewrites. The variants made
// from it (Variant.Generate) leave the marker lines out.

// beginMarker and endMarker are the comments that begin and end the
// generated block name.
func beginMarker(name string) string { return "# BEGIN generated " + name + " by `make template`" }
func endMarker(name string) string   { return "# END generated " + name }

// blockBounds returns where the generated block name starts (its BEGIN
// line's first byte) and ends (after its END line's newline) in text.
func blockBounds(text, name string) (int, int, bool) {
	begin, end := beginMarker(name), endMarker(name)+"\n"
	i, j := strings.Index(text, begin), strings.Index(text, end)
	if i < 0 || j < i || strings.Count(text, begin) != 1 || strings.Count(text, end) != 1 {
		return 0, 0, false
	}
	i = strings.LastIndex(text[:i], "\n") + 1
	return i, j + len(end), true
}

// ReplaceBlock returns template text with its generated block name (the
// marker lines included) replaced by block, which holds its own markers;
// an error when text has no such block, or more than one.
func ReplaceBlock(text, name, block string) (string, error) {
	i, j, ok := blockBounds(text, name)
	if !ok {
		return "", fmt.Errorf("infra: the template has no one %q ... %q block", beginMarker(name), endMarker(name))
	}
	return text[:i] + block + text[j:], nil
}

// Block returns the generated block name the template text holds, marker
// lines included, or "" without one.
func Block(text, name string) string {
	i, j, ok := blockBounds(text, name)
	if !ok {
		return ""
	}
	return text[i:j]
}
