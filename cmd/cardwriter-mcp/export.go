package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// runExport exports a card as a Character Card V3 file (JSON, PNG or CHARX), with export_tavern_card.
func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("export", "export ROLE_ID -o FILE [--format json|png|charx] [--sandbox [--sandbox-data FILE] | --api-host URL]", stderr)
	var f serverFlags
	cliFlags(fs, &f)
	var out string
	fs.StringVar(&out, "o", "", "the file to write (- for stdout)")
	fs.StringVar(&out, "output", "", "the file to write (same as -o)")
	format := fs.String("format", "", "json, png or charx (default: by the file name's extension, .png or .charx; else json)")
	pos, err := parseWithPositional(fs, args, 1)
	if err != nil {
		return helpOK(err)
	}
	if out == "" {
		fmt.Fprintln(stderr, "export needs -o FILE (or -o - for stdout)")
		fs.Usage()
		return errUsage
	}
	if *format == "" {
		*format = "json"
		switch ext := strings.ToLower(filepath.Ext(out)); ext {
		case ".png", ".charx":
			*format = ext[1:]
		}
	}
	if *format != "json" && *format != "png" && *format != "charx" {
		return fmt.Errorf("--format %q: want json, png or charx", *format)
	}
	if f.tavern.aside, err = fileAside(); err != nil {
		return err
	}
	b, err := f.newBackend(stderr, "")
	if err != nil {
		return err
	}
	res, sc, err := callTool(ctx, b, "export_tavern_card", map[string]any{"roleId": pos[0], "format": *format}, stderr)
	if err != nil {
		return err
	}
	var data []byte
	if *format != "json" {
		s, _ := sc["dataBase64"].(string)
		if data, err = base64.StdEncoding.DecodeString(s); err != nil || len(data) == 0 {
			return fmt.Errorf("export_tavern_card returned no %s file", strings.ToUpper(*format))
		}
	} else {
		if len(res.Content) < 2 {
			return errors.New("export_tavern_card returned no file")
		}
		tc, ok := res.Content[1].(mcp.TextContent)
		if !ok {
			return errors.New("export_tavern_card returned no JSON file")
		}
		data = []byte(tc.Text)
	}
	summary := stdout
	if out == "-" {
		if _, err := stdout.Write(data); err != nil {
			return err
		}
		summary = stderr
	} else if err := os.WriteFile(out, data, 0o644); err != nil {
		return err
	}
	_, err = fmt.Fprintln(summary, firstText(res))
	return err
}
