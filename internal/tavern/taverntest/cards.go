package taverntest

// Fixture cards and lorebooks, built as JSON-shaped values (no binary blobs). Each call returns a
// fresh value, which a test may change.

import "encoding/json"

// N is a json.Number literal, as decoded values hold numbers.
func N(s string) json.Number { return json.Number(s) }

// V1Card is a V1 card as old TavernAI files have it, with extra top-level fields.
func V1Card() map[string]any {
	return map[string]any{
		"name":          "Mira",
		"description":   "A lighthouse keeper on a storm coast.",
		"personality":   "patient, wry",
		"scenario":      "The lamp has gone out.",
		"first_mes":     "*Mira looks up from the logbook.* You're soaked.",
		"mes_example":   "<START>\n{{user}}: Hello?\n{{char}}: Shut the door, the wind's up.",
		"avatar":        "none",
		"chat":          "Mira - 2023-5-4 @12h 00m 00s 000ms",
		"talkativeness": "0.5",
		"create_date":   "2023-5-4 @12h 00m 00s 000ms",
	}
}

// V2Card is a V2 card the way SillyTavern exports one: the V1 fields copied beside data, a
// character_book converted from World Info (with null "use global" options), extensions.
func V2Card() map[string]any {
	data := map[string]any{
		"name":                      "Captain Vey",
		"description":               "Captain of the *Gull*, a smuggler's sloop.",
		"personality":               "bold; loyal to her crew",
		"scenario":                  "Night, a customs cutter on the horizon.",
		"first_mes":                 "\"Hold the lantern lower,\" Vey whispers.",
		"mes_example":               "<START>\n{{char}}: We run dark tonight.",
		"creator_notes":             "Works best with a slow-burn heist.",
		"system_prompt":             "Write Vey's replies in third person.",
		"post_history_instructions": "Keep replies under 200 words.",
		"alternate_greetings":       []any{"Vey tosses you a rope.", "\"You're late,\" Vey says.", "Vey is asleep in the hammock."},
		"tags":                      []any{"pirate", "adventure"},
		"creator":                   "harbourmaster",
		"character_version":         "1.2",
		"extensions": map[string]any{
			"talkativeness": "0.5",
			"fav":           false,
			"world":         "Gull lore",
			"depth_prompt":  map[string]any{"prompt": "Vey hums sea shanties.", "depth": N("4"), "role": "system"},
		},
		"character_book": map[string]any{
			"name": "Gull lore",
			"entries": []any{
				map[string]any{
					"id":              N("0"),
					"keys":            []any{"kraken", "sea monster"},
					"secondary_keys":  []any{"storm"},
					"comment":         "The kraken",
					"content":         "A kraken haunts the Shoals.",
					"constant":        false,
					"selective":       true,
					"insertion_order": N("100"),
					"enabled":         true,
					"position":        "before_char",
					"use_regex":       true,
					"extensions": map[string]any{
						"position":              N("0"),
						"exclude_recursion":     false,
						"display_index":         N("0"),
						"probability":           N("100"),
						"useProbability":        true,
						"depth":                 N("4"),
						"selectiveLogic":        N("0"),
						"group":                 "",
						"group_override":        false,
						"group_weight":          N("100"),
						"prevent_recursion":     false,
						"delay_until_recursion": false,
						"scan_depth":            nil,
						"match_whole_words":     nil,
						"use_group_scoring":     false,
						"case_sensitive":        nil,
						"automation_id":         "",
						"role":                  N("0"),
						"vectorized":            false,
						"sticky":                nil,
						"cooldown":              nil,
						"delay":                 nil,
					},
				},
				map[string]any{
					"id":              N("1"),
					"keys":            []any{"customs"},
					"secondary_keys":  []any{"bribe", "papers"},
					"comment":         "Customs",
					"content":         "The cutter's captain takes bribes.",
					"constant":        false,
					"selective":       true,
					"insertion_order": N("90"),
					"enabled":         true,
					"position":        "after_char",
					"use_regex":       true,
					"extensions": map[string]any{
						"position":          N("4"),
						"depth":             N("2"),
						"selectiveLogic":    N("3"),
						"match_whole_words": true,
						"case_sensitive":    false,
						"probability":       N("80"),
						"group":             "law",
					},
				},
			},
		},
	}
	return map[string]any{
		"name":           data["name"],
		"description":    data["description"],
		"personality":    data["personality"],
		"scenario":       data["scenario"],
		"first_mes":      data["first_mes"],
		"mes_example":    data["mes_example"],
		"creatorcomment": data["creator_notes"],
		"tags":           data["tags"],
		"avatar":         "none",
		"chat":           "Captain Vey - 2024-9-1 @10h 00m 00s 000ms",
		"talkativeness":  "0.5",
		"fav":            false,
		"create_date":    "2024-9-1 @10h 00m 00s 000ms",
		"spec":           "chara_card_v2",
		"spec_version":   "2.0",
		"data":           data,
	}
}

// V3Card is a canonical CCv3 card (every field tavern's writer writes is present), with emoji and
// CJK text, the V3-only fields, a lorebook with settings, regex and CJK keys, and unknown fields at
// every level.
func V3Card() map[string]any {
	return map[string]any{
		"spec":         "chara_card_v3",
		"spec_version": "3.0",
		"data": map[string]any{
			"name":                      "龍王 🐉 Ryūō",
			"description":               "東海の龍王。\n🌊 Rules the eastern sea.",
			"personality":               "尊大だが公正 — proud but fair",
			"scenario":                  "海底宮殿にて。",
			"first_mes":                 "「よく来たな、人の子よ。」🐚",
			"mes_example":               "<START>\n{{user}}: 你好\n{{char}}: 何用だ？",
			"creator_notes":             "Bilingual card. 日本語と英語。",
			"system_prompt":             "",
			"post_history_instructions": "",
			"alternate_greetings":       []any{"🌀 The water stills.", "龍王は目を開けた。"},
			"character_book": map[string]any{
				"name":               "東海",
				"description":        "Lore of the eastern sea",
				"scan_depth":         N("8"),
				"token_budget":       N("1024"),
				"recursive_scanning": true,
				"extensions":         map[string]any{"risu_fullWordMatching": true},
				"entries": []any{
					map[string]any{
						"id":              N("7"),
						"keys":            []any{"龍宮", "palace"},
						"secondary_keys":  []any{},
						"comment":         "comment differs from name",
						"content":         "龍宮は海底にある。🏯",
						"constant":        false,
						"selective":       false,
						"insertion_order": N("10"),
						"enabled":         true,
						"position":        "before_char",
						"use_regex":       false,
						"extensions":      map[string]any{"cardwriter/category": "places", "depth": N("4")},
						"name":            "Dragon palace",
						"priority":        N("5"),
						"case_sensitive":  true,
					},
					map[string]any{
						"keys":            []any{"pearl"},
						"secondary_keys":  []any{"stolen"},
						"comment":         "Pearl (inactive secondary)",
						"content":         "The pearl of tides.",
						"constant":        false,
						"selective":       false,
						"insertion_order": N("2.5"),
						"enabled":         true,
						"extensions":      map[string]any{},
						"name":            "Pearl (inactive secondary)",
					},
					map[string]any{
						"keys":            []any{"/tide(s)?\\s+turn/i"},
						"secondary_keys":  []any{},
						"comment":         "Always on",
						"content":         "The sea is always present.",
						"constant":        true,
						"insertion_order": N("0"),
						"enabled":         false,
						"extensions":      map[string]any{"selectiveLogic": N("2"), "match_whole_words": false},
						"name":            "Always on",
						"priority":        N("-3"),
						"x_unknown_entry": map[string]any{"kept": true},
					},
				},
			},
			"tags":                       []any{"dragon", "東洋", "🐉"},
			"creator":                    "海の人",
			"character_version":          "3.1",
			"extensions":                 map[string]any{"depth_prompt": map[string]any{"prompt": "潮の香り", "depth": N("4")}},
			"group_only_greetings":       []any{"龍王 addresses the group."},
			"assets":                     []any{map[string]any{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"}},
			"nickname":                   "Ryū",
			"creator_notes_multilingual": map[string]any{"ja": "日本語のメモ", "en": "English note"},
			"source":                     []any{"https://example.com/ryuo"},
			"creation_date":              N("1700000000"),
			"modification_date":          N("1700000500"),
			"x_unknown_data":             []any{N("1"), "two", nil},
		},
		"x_root_field": "kept at the top",
	}
}

// SloppyCard has the types real files get wrong: strings for arrays, "true" for booleans,
// numbers as strings, null extensions, a null entry, a book without a name.
func SloppyCard() map[string]any {
	return map[string]any{
		"spec":         "chara_card_v2",
		"spec_version": N("2"),
		"data": map[string]any{
			"name":                "Sloppy",
			"description":         "desc",
			"first_mes":           "hi",
			"alternate_greetings": "only one, with a comma",
			"tags":                "a, b ,c",
			"creator":             nil,
			"character_version":   N("2"),
			"extensions":          nil,
			"character_book": map[string]any{
				"extensions": nil,
				"entries": []any{
					map[string]any{
						"keys":            "alpha, beta",
						"secondary_keys":  "gamma",
						"selective":       "true",
						"content":         N("42"),
						"enabled":         "true",
						"constant":        "false",
						"insertion_order": "100",
						"priority":        "7",
						"extensions":      nil,
					},
					map[string]any{
						"keys":    []any{"delta", nil, N("5")},
						"content": "no enabled field",
						"extensions": map[string]any{
							"selectiveLogic":    "1",
							"case_sensitive":    "true",
							"match_whole_words": N("1"),
						},
					},
					nil,
				},
			},
		},
	}
}

// WorldInfo is a SillyTavern World Info file: entries keyed by uid (in an order that is not sorted),
// SillyTavern's field names, null "use global" options.
func WorldInfo() string {
	return `{
  "entries": {
    "3": {
      "uid": 3, "key": ["kraken", "sea monster"], "keysecondary": ["storm", "squall"],
      "comment": "Kraken", "content": "A kraken haunts the Shoals.", "constant": false,
      "vectorized": false, "selective": true, "selectiveLogic": 1, "addMemo": true, "order": 100,
      "position": 0, "disable": false, "excludeRecursion": false, "preventRecursion": false,
      "delayUntilRecursion": false, "probability": 100, "useProbability": true, "depth": 4,
      "group": "", "groupOverride": false, "groupWeight": 100, "scanDepth": null,
      "caseSensitive": null, "matchWholeWords": null, "useGroupScoring": null, "automationId": "",
      "role": null, "sticky": 0, "cooldown": 0, "delay": 0, "displayIndex": 0,
      "characterFilter": {"isExclude": false, "names": [], "tags": []}
    },
    "0": {
      "uid": 0, "key": ["龍"], "keysecondary": [], "comment": "Dragon (CJK)", "content": "龍がいる。",
      "constant": false, "selective": true, "selectiveLogic": 0, "order": 50, "position": 4,
      "disable": true, "caseSensitive": true, "matchWholeWords": true, "depth": 2, "displayIndex": 1
    },
    "1": {
      "uid": 1, "key": "lighthouse, lamp", "keysecondary": [], "comment": "", "content": "The lamp.",
      "constant": "true", "selective": false, "order": "10", "position": 1, "disable": "false",
      "matchWholeWords": false, "selectiveLogic": 3
    }
  },
  "name": "Shoals",
  "originalData": {"name": "Shoals (original)", "scan_depth": 6, "entries": [{"keys": ["stale"]}]}
}`
}

// Lorebook is a standalone lorebook_v3 file.
func Lorebook() map[string]any {
	return map[string]any{
		"spec": "lorebook_v3",
		"data": map[string]any{
			"name": "Harbour lore", "description": "Docks, taverns and tides.", "scan_depth": N("4"),
			"extensions": map[string]any{"note": "from a lorebook file"},
			"entries": []any{
				map[string]any{"keys": []any{"dock", "pier"}, "content": "The docks never sleep.", "enabled": true,
					"insertion_order": N("20"), "name": "Docks", "extensions": map[string]any{"depth": N("3")}},
				map[string]any{"keys": []any{"/ale|mead/i"}, "content": "The Salty Cup serves both.", "enabled": true,
					"insertion_order": N("10"), "name": "Tavern", "case_sensitive": false,
					"extensions": map[string]any{"match_whole_words": true, "selectiveLogic": N("0")}},
			},
		},
	}
}
