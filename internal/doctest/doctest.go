// Package doctest runs the shell blocks of the documentation that are
// marked runnable and compares what they print with what the docs say
// they print. It is how README.md and docs/*.md stay true: a test
// (examples/checkout's TestRunnableDocs) starts a console and the demo and
// runs every such block in order, as a reader following the docs would.
//
// A block is runnable when the line right before its ```sh fence is
//
//	<!-- runnable -->
//
// Inside it, a command is a line (with its continuation lines: a trailing
// backslash, or a quote still open). The comment lines right after a
// command ("# …") are its documented output, one line each. Output lines
// are compared one to one, except:
//
//   - a line that is only "..." or "…" stands for any number of lines;
//   - when both lines are JSON, they are compared as JSON: an expected
//     string "…" (or "...") matches any value, and the members whose values
//     vary from run to run — revision, request_id, head_hash, tree_root, on_since,
//     expires_at and every *_at — need only be present;
//   - trailing spaces and carriage returns do not count.
//
// Everything else must be equal, so a documented output that no longer
// matches fails the test.
package doctest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
)

// Marker is the line that marks the next ```sh block runnable.
const Marker = "<!-- runnable -->"

// Command is one shell command of a runnable block and its documented
// output (nil: the docs say nothing about it).
type Command struct {
	File   string
	Line   int
	Text   string
	Expect []string
}

func (c Command) String() string { return fmt.Sprintf("%s:%d", c.File, c.Line) }

// Extract returns the commands of the runnable blocks of the Markdown file
// path, in order; name is how the commands cite it.
func Extract(path, name string) ([]Command, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(b, name)
}

// Parse is Extract on the file's content.
func Parse(md []byte, name string) ([]Command, error) {
	var out []Command
	lines := strings.Split(string(md), "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != Marker {
			continue
		}
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```sh" {
			return nil, fmt.Errorf("%s:%d: %s must stand right before a ```sh fence", name, i+1, Marker)
		}
		end := i + 2
		for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("%s:%d: the runnable block does not end", name, i+2)
		}
		cmds, err := parseBlock(lines[i+2:end], name, i+3)
		if err != nil {
			return nil, err
		}
		out = append(out, cmds...)
		i = end
	}
	return out, nil
}

// parseBlock splits a block's lines (the first is line first of the file)
// into commands and their documented output: the comment lines right after
// a command. A comment line after a blank line is only a comment.
func parseBlock(lines []string, name string, first int) ([]Command, error) {
	var out []Command
	var cur *Command
	attach := false // a comment line now is the last command's output
	for i, l := range lines {
		switch {
		case cur != nil:
			cur.Text += "\n" + l
		case strings.HasPrefix(l, "#") && attach:
			last := &out[len(out)-1]
			last.Expect = append(last.Expect, strings.TrimPrefix(strings.TrimPrefix(l, "#"), " "))
			continue
		case strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#"):
			attach = false
			continue
		default:
			cur = &Command{File: name, Line: first + i, Text: l}
		}
		if !open(cur.Text) {
			out = append(out, *cur)
			cur, attach = nil, true
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: the command does not end (a quote or a backslash left open)", name, cur.Line)
	}
	return out, nil
}

// open reports whether a command goes on on the next line: it ends with a
// backslash, leaves a quote open, or opens more compound commands (do,
// if, case) than it closes (done, fi, esac).
func open(cmd string) bool {
	if strings.HasSuffix(cmd, "\\") {
		return true
	}
	var quote rune
	escaped := false
	var word strings.Builder
	depth := 0
	endWord := func() {
		switch word.String() {
		case "do", "if", "case":
			depth++
		case "done", "fi", "esac":
			depth--
		}
		word.Reset()
	}
	for _, r := range cmd {
		switch {
		case escaped:
			escaped = false
		case r == '\\' && quote != '\'':
			escaped = true
		case quote == 0 && (r == '\'' || r == '"'):
			quote = r
		case r == quote:
			quote = 0
		case quote == 0 && strings.ContainsRune(" \t\n;&|()", r):
			endWord()
		case quote == 0:
			word.WriteRune(r)
		}
	}
	endWord()
	return quote != 0 || depth > 0
}

// Match compares the output a command printed with its documented output;
// the error says where they differ.
func Match(expect []string, output string) error {
	got := strings.Split(strings.TrimRight(strings.ReplaceAll(output, "\r", ""), "\n"), "\n")
	if output == "" || strings.TrimSpace(output) == "" {
		got = nil
	}
	if matchLines(expect, got) {
		return nil
	}
	return fmt.Errorf("documented output:\n\t%s\nprinted:\n\t%s", strings.Join(expect, "\n\t"), strings.Join(got, "\n\t"))
}

func matchLines(expect, got []string) bool {
	if len(expect) == 0 {
		return len(got) == 0
	}
	if e := strings.TrimSpace(expect[0]); e == "..." || e == "…" {
		for skip := 0; skip <= len(got); skip++ {
			if matchLines(expect[1:], got[skip:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && matchLine(expect[0], got[0]) && matchLines(expect[1:], got[1:])
}

func matchLine(expect, got string) bool {
	expect, got = strings.TrimRight(expect, " \t"), strings.TrimRight(got, " \t")
	var e, g any
	if jsonValue(expect, &e) && jsonValue(got, &g) {
		return matchJSON(e, g)
	}
	return expect == got
}

func jsonValue(s string, v *any) bool {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "{") && !strings.HasPrefix(s, "[") {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	return dec.Decode(v) == nil && !dec.More()
}

// matchJSON compares an expected JSON value with a printed one.
func matchJSON(e, g any) bool {
	if s, ok := e.(string); ok && (s == "…" || s == "...") {
		return true
	}
	switch ev := e.(type) {
	case map[string]any:
		gv, ok := g.(map[string]any)
		if !ok || len(gv) != len(ev) {
			return false
		}
		for k, x := range ev {
			y, ok := gv[k]
			if !ok {
				return false
			}
			if !Varies(k) && !matchJSON(x, y) {
				return false
			}
		}
		return true
	case []any:
		gv, ok := g.([]any)
		if !ok || len(gv) != len(ev) {
			return false
		}
		for i := range ev {
			if !matchJSON(ev[i], gv[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(e, g)
}

// Varies reports whether a JSON member's value differs from run to run,
// so that only its presence is compared.
func Varies(key string) bool {
	switch key {
	case "revision", "request_id", "head_hash", "tree_root", "on_since", "expires_at":
		return true
	}
	return strings.HasSuffix(key, "_at")
}
