package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// promptArg is one argument of a prompt.
type promptArg struct {
	name, description string
	required          bool
}

// prompt is one guided workflow. Its text names tools in backticks (`create_card`); a prompt is
// served only when every tool it names is, and a test checks that each name is in the registry.
type prompt struct {
	name, title, description string
	args                     []promptArg
	render                   func(args map[string]string) string
}

var prompts = []prompt{
	{
		name:        "author_card",
		title:       "Author a card from an idea",
		description: "A guided workflow from an idea to a validated card: create it, write its opening lines, text, profile and (optionally) a worldbook, validate and fix it.",
		args: []promptArg{
			{"idea", "The card idea: who the character is, the setting, the tone.", true},
			{"language", "The language to write the card in (default: the language of the idea).", false},
			{"withWorldbook", "\"yes\" to also build a worldbook of places, people and lore and bind it to the card.", false},
		},
		render: renderAuthorCard,
	},
	{
		name:        "build_worldbook",
		title:       "Build a worldbook",
		description: "A guided workflow to create (or extend) a worldbook of keyword-triggered entries and bind it to a card.",
		args: []promptArg{
			{"topic", "What the worldbook covers: a setting, its places, factions, people and lore.", true},
			{"roleId", "The card to bind the worldbook to (optional).", false},
			{"worldbookId", "An existing worldbook to extend instead of creating a new one (optional).", false},
		},
		render: renderBuildWorldbook,
	},
	{
		name:        "try_card_as_trial",
		title:       "Try a card idea as a trial card",
		description: "Turn an idea into a temporary trial card to try it before authoring it for real.",
		args: []promptArg{
			{"idea", "The card idea to try.", true},
			{"clientKey", "The key to keep the trial under (letters, digits, '.', '_', '-'; default: one derived from the idea).", false},
		},
		render: renderTryTrial,
	},
}

func renderAuthorCard(a map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Author a role-play card on the card service from this idea:\n\n%s\n\n", a["idea"])
	if lang := a["language"]; lang != "" {
		fmt.Fprintf(&b, "Write every text of the card in this language: %s.\n\n", lang)
	}
	b.WriteString("Work through these steps with the cardwriter tools, and tell the user briefly what you did after each one.\n\n")
	b.WriteString("1. Call `create_card` with a fitting roleName (and language if known). Keep the returned roleId; " +
		"pass an idempotencyKey of your own so that repeating the call cannot make a second card.\n")
	b.WriteString("2. Call `set_opening_lines`: roleWelcome is the character's first message, written as the character " +
		"(set the scene, give the player something to answer). Add 1 to 3 alternates (other first messages the player may " +
		"pick). Add 2 to 4 prologue lines: these are suggestions for the PLAYER to say, written in the player's voice; they " +
		"are never sent as the character.\n")
	b.WriteString("3. Call `write_card_document` with the sections: description (required to publish), personality, " +
		"scenario, exampleDialogue (a few exchanges showing the character's voice), and systemPrompt or " +
		"postHistoryInstructions only if the idea needs them; creatorNotes for notes to other people.\n")
	b.WriteString("4. Call `update_card_profile` with roleDesc (one or two sentences for listings) and a few tags. " +
		"If the user gives an image, upload it with `upload_image` (purpose avatar) and set avatarImageId.\n")
	if yes(a["withWorldbook"]) {
		b.WriteString("5. Build a worldbook: call `create_worldbook` (format native unless the user wants SillyTavern " +
			"compatibility), then `write_worldbook_document` with create ops for the key places, people, factions and " +
			"lore (each with name, content and a few keywords that would appear in chat), and binding {roleId} to bind " +
			"it to the card. At most 500 entries per call.\n")
	} else {
		b.WriteString("5. A worldbook is optional; suggest one if the setting has lore that does not fit the description.\n")
	}
	b.WriteString("6. Call `validate_card`. Fix every issue of severity error with the tools above (and the warnings " +
		"where it makes sense), then validate again until ready is true.\n")
	b.WriteString("7. Show the user a short summary of the card (name, first message, tags) and ask whether to publish. " +
		"Call `publish_card` only if the user asks for it; the card stays private otherwise.\n\n")
	b.WriteString("If a tool result has isError, read its message: invalid arguments name the failing field, and " +
		"a not-found error means the roleId is wrong. Use `get_card` to check what is stored.")
	return b.String()
}

func renderBuildWorldbook(a map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Build a worldbook of keyword-triggered entries about:\n\n%s\n\n", a["topic"])
	if id := a["worldbookId"]; id != "" {
		fmt.Fprintf(&b, "1. Extend the existing worldbook %s: call `get_worldbook` and `list_worldbook_entries` to see "+
			"what it holds, so that you update entries rather than duplicate them.\n", id)
	} else {
		b.WriteString("1. Call `list_worldbooks` to check whether a fitting worldbook exists; if not, call " +
			"`create_worldbook` with a name, description and tags (format native unless the user wants SillyTavern " +
			"compatibility).\n")
	}
	b.WriteString("2. Plan the entries: one per place, person, faction, object or rule the story needs. Each entry has a " +
		"name, content (what the character should know when it fires) and keywords (words that appear in chat). Use " +
		"secondaryKeywords only as an AND gate, isConstant only for always-on facts, and category to group entries.\n")
	b.WriteString("3. Call `write_worldbook_document` with op create for new entries, op update (with entryId) to change " +
		"fields, op delete (entryId only) to remove one; at most 500 ops per call. If it fails, read the error's message " +
		"and detail (they name the failing op when the service says which), and check with `list_worldbook_entries` " +
		"what was written before sending it again.\n")
	if id := a["roleId"]; id != "" {
		fmt.Fprintf(&b, "4. Bind the worldbook to card %s with binding {\"roleId\": %q} in the same call, then check "+
			"it with `list_card_worldbooks`.\n", id, id)
	} else {
		b.WriteString("4. If the user names a card, bind the worldbook to it with binding {roleId} and check with " +
			"`list_card_worldbooks`.\n")
	}
	b.WriteString("5. Call `list_worldbook_entries` and give the user a short overview of the entries and their keywords.")
	return b.String()
}

func renderTryTrial(a map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Try this card idea as a temporary trial card:\n\n%s\n\n", a["idea"])
	key := a["clientKey"]
	if key == "" {
		key = "a short key derived from the idea (letters, digits, '.', '_', '-')"
	}
	b.WriteString("1. Call `list_trial_cards`: it reports the slots in use of those the service allows (slots.used, " +
		"slots.max) and how long trials live (ttlHours). If all slots are used, ask the user which trial to remove and " +
		"call `delete_trial_card`.\n")
	fmt.Fprintf(&b, "2. Call `upsert_trial_card` with clientKey %s and card {roleName, roleDesc, roleWelcome "+
		"(the character's first message), welcomeAlternates (other first messages), prologue (suggestions for the PLAYER "+
		"to say, never sent as the character), sections {description, personality, scenario, exampleDialogue}}. "+
		"Add worldbook.entries (name, content, keywords) if the idea has lore. The card is a full replacement: "+
		"always send every field.\n", key)
	b.WriteString("3. To revise, call `upsert_trial_card` again with the same clientKey and the whole card; the result's " +
		"changed lists what differs. `get_trial_card` shows the current state.\n")
	b.WriteString("4. When the user likes it, offer to author it for real with `create_card`, `set_opening_lines`, " +
		"`write_card_document` and `update_card_profile` (there the alternates field is called alternates), then " +
		"`delete_trial_card` to free the slot.")
	return b.String()
}

func yes(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "yes", "y", "true", "1":
		return true
	}
	return false
}

// backticked finds names in backticks that look like tool names (snake_case).
var backticked = regexp.MustCompile("`([a-z]+(?:_[a-z]+)*)`")

// toolNames returns the tool names a prompt's text mentions, rendered with every argument set.
func (p prompt) toolNames() []string {
	args := map[string]string{}
	for _, a := range p.args {
		args[a.name] = "x"
	}
	args["withWorldbook"] = "yes"
	var names []string
	for _, m := range backticked.FindAllStringSubmatch(p.render(args), -1) {
		if !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	// Optional branches may mention other tools: render them too.
	for _, m := range backticked.FindAllStringSubmatch(p.render(map[string]string{}), -1) {
		if !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	slices.Sort(names)
	return names
}

// InvalidPromptArguments returns why the params of a request to method are invalid, for a
// prompts/get of a prompt of ours that lacks a required argument (absent or blank), so that the
// request is answered -32602 before mcp-go dispatches it (which answers a handler's error
// -32603); "" for any other request.
func InvalidPromptArguments(method string, params json.RawMessage) string {
	if method != string(mcp.MethodPromptsGet) || len(params) == 0 {
		return ""
	}
	var req struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	}
	if json.Unmarshal(params, &req) != nil {
		return "" // mcp-go refuses what it cannot decode
	}
	i := slices.IndexFunc(prompts, func(p prompt) bool { return p.name == req.Name })
	if i < 0 {
		return ""
	}
	var missing []string
	for _, a := range prompts[i].args {
		if v, _ := req.Arguments[a.name].(string); a.required && strings.TrimSpace(v) == "" {
			missing = append(missing, a.name)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("prompt %s needs the argument %s", req.Name, strings.Join(missing, ", "))
}

// addPrompts registers every prompt whose tools are all served.
func addPrompts(srv *server.MCPServer, served []Tool) {
	for _, p := range prompts {
		if !slices.ContainsFunc(p.toolNames(), func(n string) bool {
			return !slices.ContainsFunc(served, func(t Tool) bool { return t.Name == n })
		}) {
			srv.AddPrompt(p.mcpPrompt(), p.handler())
		}
	}
}

func (p prompt) mcpPrompt() mcp.Prompt {
	opts := []mcp.PromptOption{mcp.WithPromptTitle(p.title), mcp.WithPromptDescription(p.description)}
	for _, a := range p.args {
		aopts := []mcp.ArgumentOption{mcp.ArgumentDescription(a.description)}
		if a.required {
			aopts = append(aopts, mcp.RequiredArgument())
		}
		opts = append(opts, mcp.WithArgument(a.name, aopts...))
	}
	return mcp.NewPrompt(p.name, opts...)
}

// wordSplitters are the clients (by clientInfo.name) known to split what a user types after a
// prompt's name on spaces and hand the words to the prompt's arguments one by one, dropping the
// words past the last argument: Claude Code (anthropics/claude-code#14210).
var wordSplitters = []string{"claude-code"}

// cutShortNote is added to a prompt whose free text may have lost words to such a client.
const cutShortNote = "\n\nNote: this host passes a prompt only the first words the user typed after its name. If the text above looks cut short, ask the user for the whole of it (or take it from what they said before) before you start."

func (p prompt) handler() server.PromptHandlerFunc {
	return func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		args := map[string]string{}
		for _, a := range p.args {
			args[a.name] = strings.TrimSpace(req.Params.Arguments[a.name])
		}
		note := ""
		if splitsWords(ctx) {
			// The words are the user's text in order, not named values: they all belong to
			// the first argument, the free text.
			var words []string
			for _, a := range p.args {
				if v := args[a.name]; v != "" {
					words = append(words, v)
				}
				args[a.name] = ""
			}
			args[p.args[0].name] = strings.Join(words, " ")
			if len(words) >= len(p.args) {
				note = cutShortNote
			}
		}
		for _, a := range p.args {
			if a.required && args[a.name] == "" {
				return nil, fmt.Errorf("prompt %s needs the argument %s", p.name, a.name)
			}
		}
		return mcp.NewGetPromptResult(p.description, []mcp.PromptMessage{
			mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(p.render(args)+note)),
		}), nil
	}
}

// splitsWords reports whether the client of ctx's session is one of wordSplitters.
func splitsWords(ctx context.Context) bool {
	cs, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo)
	return ok && slices.Contains(wordSplitters, cs.GetClientInfo().Name)
}
