package drill

import (
	"strings"
	"testing"
)

// TestMarkdownFenceOutgrowsTheBody: a failing body with backtick runs
// cannot close the report's code fence early.
func TestMarkdownFenceOutgrowsTheBody(t *testing.T) {
	for body, want := range map[string]int{`{"a":1}`: 3, "``` x": 4, "a ````` b ``": 6} {
		if got := fence(body); got != strings.Repeat("`", want) {
			t.Errorf("fence(%q) = %q, want %d backticks", body, got, want)
		}
	}
	p := &Progress{Verdicts: &Verdicts{FallbackCorrect: Verdict{Result: Fail, Summary: "s",
		Details: []string{firstFailingBody + "```\n# injected heading\n```"}}}}
	r := &Run{App: "a", Drill: "d", Number: 1, SwitchName: "s", Spec: "{}", State: encode(p)}
	md := r.Markdown(true)
	if !strings.Contains(md, "````json\n```\n# injected heading\n```\n````") {
		t.Fatalf("the body escapes its fence:\n%s", md)
	}
	if strings.Contains(r.Markdown(false), "injected") {
		t.Fatal("a reader's report shows the body")
	}
}
