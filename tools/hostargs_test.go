package tools

import (
	"strings"
	"testing"
)

// TestHostArgumentsDropped: the arguments a known host adds to every call (Gemini CLI's
// wait_for_previous) are dropped before validation, on tools of one operation and tools with a
// handler of their own; any other unknown argument is still refused.
func TestHostArgumentsDropped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	card := e.ok("create_card", `{"roleName":"Mira","wait_for_previous":true}`)
	roleID, _ := card["roleId"].(string)
	if roleID == "" {
		t.Fatalf("create_card: %v", card)
	}
	tests := []struct {
		tool, args string
	}{
		{"get_card", `{"roleId":"` + roleID + `","wait_for_previous":false}`},
		{"set_opening_lines", `{"wait_for_previous":true,"roleId":"` + roleID + `","roleWelcome":"Hello."}`},
		{"test_worldbook_triggers", `{"entries":[{"name":"a","keywords":["moon"],"content":"x"}],"text":"the moon","wait_for_previous":true}`},
		{"whoami", `{"wait_for_previous":true}`},
	}
	for _, tt := range tests {
		e.ok(tt.tool, tt.args)
		_, msg := e.fail(tt.tool, strings.Replace(tt.args, "wait_for_previous", "wait_for_next", 1))
		if !strings.Contains(msg, "wait_for_next") {
			t.Errorf("%s: another unknown argument: %s", tt.tool, msg)
		}
	}
}
