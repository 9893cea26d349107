package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// exporter is one export command: the tool it calls, the argument naming what to export, and the
// formats it writes (the first is the default; binary ones come back base64 in dataBase64, text
// ones as the result's second content).
type exporter struct {
	command, usage, tool, idArg string
	idWord                      string // the operand's name in the usage
	formats, binary             []string
}

var (
	cardExporter = exporter{command: "export", tool: "export_tavern_card", idArg: "roleId", idWord: "ROLE_ID",
		usage:   "export ROLE_ID -o FILE [--format json|png|charx] [--sandbox [--sandbox-data FILE] | --api-host URL [--contract FILE]]",
		formats: []string{"json", "png", "charx"}, binary: []string{"png", "charx"}}
	worldbookExporter = exporter{command: "export-worldbook", tool: "export_tavern_worldbook", idArg: "worldbookId", idWord: "WORLDBOOK_ID",
		usage:   "export-worldbook WORLDBOOK_ID -o FILE [--format worldinfo|lorebook_v3] [--sandbox [--sandbox-data FILE] | --api-host URL [--contract FILE]]",
		formats: []string{"worldinfo", "lorebook_v3"}}
)

// runExport exports a card as a Character Card V3 file (JSON, PNG or CHARX), with export_tavern_card.
func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return cardExporter.run(ctx, args, stdout, stderr)
}

// runExportWorldbook exports a worldbook as a SillyTavern World Info or lorebook_v3 file, with
// export_tavern_worldbook.
func runExportWorldbook(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return worldbookExporter.run(ctx, args, stdout, stderr)
}

func (x exporter) run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(x.command, x.usage, stdout, stderr, cliEnv...)
	var f serverFlags
	fileFlags(fs, &f)
	var out string
	cliOnlyString(fs, &out, "o", "", "the file to write (- for stdout)")
	cliOnlyString(fs, &out, "output", "", "the file to write (same as -o)")
	help := strings.Join(x.formats, ", ") + " (default: " + x.formats[0]
	if len(x.binary) > 0 {
		help += ", or by the file name's extension: ." + strings.Join(x.binary, " or .")
	}
	var format string
	cliOnlyString(fs, &format, "format", "", help+")")
	overwrite := cliOnlyBool(fs, "overwrite", "replace the -o file when it exists (as the tool's overwrite argument); without it an existing file is left alone")
	fs.Var(cliOnly{(*boolValue)(overwrite)}, "f", "the same as --overwrite")
	pos, err := parseWithPositional(fs, args, 1)
	if err != nil {
		return helpOK(err)
	}
	if err := f.keepSandbox(); err != nil {
		return err
	}
	if out == "" {
		fmt.Fprintf(stderr, "%s needs -o FILE (or -o - for stdout)\n", x.command)
		fs.Usage()
		return errUsage
	}
	if out != "-" && !*overwrite {
		if _, err := os.Lstat(out); err == nil {
			return fmt.Errorf("%s exists: give --overwrite (or -f) to replace it, or another -o FILE", out)
		}
	}
	if format == "" {
		format = x.formats[0]
		if ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(out), ".")); slices.Contains(x.binary, ext) {
			format = ext
		}
	}
	if !slices.Contains(x.formats, format) {
		return fmt.Errorf("--format %q: want %s", format, strings.Join(x.formats, ", "))
	}
	if f.tavern.aside, err = fileAside(); err != nil {
		return err
	}
	f.inlineExports = true
	_, f.localProfile = stdioRevisions(stderr)
	b, err := f.newBackend(stderr, "")
	if err != nil {
		return err
	}
	res, sc, err := callTool(ctx, b, x.tool, map[string]any{x.idArg: pos[0], "format": format}, stderr)
	if err != nil {
		return cliWords(err, map[string]string{x.idArg: x.idWord, "format": "--format"})
	}
	var data []byte
	if slices.Contains(x.binary, format) {
		s, _ := sc["dataBase64"].(string)
		if data, err = base64.StdEncoding.DecodeString(s); err != nil || len(data) == 0 {
			return fmt.Errorf("%s returned no %s file", x.tool, strings.ToUpper(format))
		}
	} else {
		if len(res.Content) < 2 {
			return fmt.Errorf("%s returned no file", x.tool)
		}
		tc, ok := res.Content[1].(mcp.TextContent)
		if !ok {
			return errors.New(x.tool + " returned no JSON file")
		}
		data = []byte(tc.Text)
	}
	summary := stdout
	if out == "-" {
		if _, err := stdout.Write(data); err != nil {
			return err
		}
		summary = stderr
	} else if err := writeOut(out, data, *overwrite); err != nil {
		return err
	}
	_, err = fmt.Fprintln(summary, firstText(res))
	return err
}

// writeOut writes the exported file; without overwrite it never replaces a file, even one
// that appeared while the export ran.
func writeOut(path string, data []byte, overwrite bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if !overwrite {
		flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists: give --overwrite (or -f) to replace it, or another -o FILE", path)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
