package upstream

import (
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// PathSegment checks s as one path segment and returns it escaped; it refuses, with an
// *ArgumentError, anything that could change the request's path once a server decodes it.
func PathSegment(s string) (string, error) {
	if reason := segmentProblem(s); reason != "" {
		return "", newArgumentError("", s, reason)
	}
	return url.PathEscape(s), nil
}

// segmentProblem says why s is not a safe path segment, or returns "".
func segmentProblem(s string) string {
	switch s {
	case "":
		return "must not be empty"
	case ".", "..":
		return "must not be \".\" or \"..\""
	}
	if !utf8.ValidString(s) {
		return "must be valid UTF-8"
	}
	if i := strings.IndexAny(s, `/\%?#`); i >= 0 {
		return fmt.Sprintf("must not contain %q", s[i])
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return "must not contain control characters"
		}
	}
	return ""
}

// queryProblem says why s is not an acceptable query value, or returns "".
func queryProblem(s string) string {
	if !utf8.ValidString(s) {
		return "must be valid UTF-8"
	}
	return ""
}
