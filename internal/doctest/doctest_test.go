package doctest

import (
	"reflect"
	"strings"
	"testing"
)

const sample = "Intro.\n\n" +
	"```sh\nnot runnable\n```\n\n" +
	Marker + "\n```sh\n" +
	"export TOKEN=sy_...   # the token\n" +
	"curl -s -X POST $API/x \\\n  -d '{\"a\":\n  1}'\n" +
	"\n" +
	"curl -s $API/y\n" +
	"# {\"id\":\"p1\",\"revision\":3}\n" +
	"# two\n" +
	"for i in 1 2; do echo $i; done\n" +
	"\n# a comment, not output\n" +
	"for s in a b; do\n  echo \"$s done\"\ndone\n" +
	"# a\n" +
	"```\n"

func TestParse(t *testing.T) {
	cmds, err := Parse([]byte(sample), "x.md")
	if err != nil {
		t.Fatal(err)
	}
	want := []Command{
		{File: "x.md", Line: 9, Text: "export TOKEN=sy_...   # the token"},
		{File: "x.md", Line: 10, Text: "curl -s -X POST $API/x \\\n  -d '{\"a\":\n  1}'"},
		{File: "x.md", Line: 14, Text: "curl -s $API/y", Expect: []string{`{"id":"p1","revision":3}`, "two"}},
		{File: "x.md", Line: 17, Text: "for i in 1 2; do echo $i; done"},
		{File: "x.md", Line: 20, Text: "for s in a b; do\n  echo \"$s done\"\ndone", Expect: []string{"a"}},
	}
	if !reflect.DeepEqual(cmds, want) {
		t.Fatalf("got  %#v\nwant %#v", cmds, want)
	}
	for _, bad := range []string{
		Marker + "\ntext\n",
		Marker + "\n```sh\necho 'open\n```\n",
		Marker + "\n```sh\necho\n",
	} {
		if _, err := Parse([]byte(bad), "bad.md"); err == nil {
			t.Errorf("Parse(%q) accepted a malformed block", bad)
		}
	}
}

// TestMatch: the comparer passes what may vary and fails every documented
// output that changed.
func TestMatch(t *testing.T) {
	doc := []string{`{"id":"p1","recommendations":["bestsellers"],"recommendations_source":"fallback"}`}
	pass := []struct {
		expect []string
		output string
	}{
		{doc, `{"recommendations_source":"fallback","id":"p1","recommendations":["bestsellers"]}` + "\n"},
		{[]string{`{"published":true,"revision":5,"switch":{"name":"a","updated_at":"2026-01-01T00:00:00Z"}}`},
			`{"published":true,"revision":912,"switch":{"name":"a","updated_at":"2026-12-02T05:00:00.123Z"}}`},
		{[]string{`{"events":11,"head_hash":"…","mismatch":null,"ok":true}`}, `{"events":11,"head_hash":"ab12","mismatch":null,"ok":true}`},
		{[]string{"HTTP/1.1 503 Service Unavailable", "Content-Type: application/problem+json", "...", `{"status":503}`},
			"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\nDate: x\r\nContent-Length: 14\r\n\r\n{\"status\":503}"},
		{[]string{"200 200 429"}, "200 200 429 \n"},
		{nil, ""},
	}
	for _, tc := range pass {
		if err := Match(tc.expect, tc.output); err != nil {
			t.Errorf("Match(%q, %q): %v", tc.expect, tc.output, err)
		}
	}
	fail := []struct {
		expect []string
		output string
	}{
		{doc, `{"id":"p1","recommendations":["socks","laces"],"recommendations_source":"live"}`},
		{doc, `{"id":"p1","recommendations":["bestsellers"],"recommendations_source":"fallback","reviews":["5/5"]}`},
		{doc, `{"id":"p1","recommendations":["bestsellers"]}`},
		{doc, `{"id":"p1","recommendations":["bestsellers"],"recommendations_source":"fallback"}` + "\nmore"},
		{doc, ""},
		{[]string{`{"events":11,"head_hash":"…","ok":true}`}, `{"events":12,"head_hash":"ab12","ok":true}`},
		{[]string{`{"revision":5}`}, `{}`},
		{[]string{"200 200 429"}, "200 200 200"},
		{[]string{"HTTP/1.1 503 Service Unavailable", "...", `{"status":503}`}, "HTTP/1.1 200 OK\r\n\r\n{\"status\":503}"},
		{nil, "unexpected"},
	}
	for _, tc := range fail {
		err := Match(tc.expect, tc.output)
		if err == nil {
			t.Errorf("Match(%q, %q) passed a changed output", tc.expect, tc.output)
		} else if !strings.Contains(err.Error(), "documented output:") {
			t.Errorf("error does not show both sides: %v", err)
		}
	}
}
