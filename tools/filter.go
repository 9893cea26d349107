package tools

import (
	"fmt"
	"slices"
	"strings"
)

// Filter selects tools from the registry. The zero value selects every tool.
//
// Toolsets and Tools add up: a tool is selected when its toolset is listed or its name is (so
// --toolsets cards --tools validate_card serves the cards toolset plus validate_card). When
// both are empty every tool is selected. ReadOnly then keeps only tools whose readOnlyHint is
// true. The toolset name "all" stands for every toolset.
type Filter struct {
	Toolsets []string
	Tools    []string
	ReadOnly bool
}

// Apply returns the tools f selects, in registry order. An unknown toolset or tool name is an
// error that lists the valid names.
func (f Filter) Apply(tools []Tool) ([]Tool, error) {
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	var unknownSets, unknownTools []string
	for _, s := range f.Toolsets {
		if s != "all" && !slices.Contains(toolsetOrder, s) {
			unknownSets = append(unknownSets, s)
		}
	}
	for _, n := range f.Tools {
		if !slices.Contains(names, n) {
			unknownTools = append(unknownTools, n)
		}
	}
	var problems []string
	if len(unknownSets) > 0 {
		problems = append(problems, fmt.Sprintf("unknown toolset %s (valid toolsets: all, %s)",
			strings.Join(unknownSets, ", "), strings.Join(toolsetOrder, ", ")))
	}
	if len(unknownTools) > 0 {
		problems = append(problems, fmt.Sprintf("unknown tool %s (valid tools: %s)",
			strings.Join(unknownTools, ", "), strings.Join(names, ", ")))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("tools: %s", strings.Join(problems, "; "))
	}
	everything := len(f.Toolsets) == 0 && len(f.Tools) == 0 || slices.Contains(f.Toolsets, "all")
	var out []Tool
	for _, t := range tools {
		if !everything && !slices.Contains(f.Toolsets, t.Toolset) && !slices.Contains(f.Tools, t.Name) {
			continue
		}
		if f.ReadOnly && !t.ReadOnly() {
			continue
		}
		out = append(out, t)
	}
	return out, nil
}
