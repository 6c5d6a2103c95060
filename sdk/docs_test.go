package sdk

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDocGoBlocksAreExamples: every ```go block of README.md and docs/*.md
// is verbatim the body of an Example function under sdk/, so go test and
// go vet compile what the docs show.
func TestDocGoBlocksAreExamples(t *testing.T) {
	bodies := exampleBodies(t, ".")
	docs, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append([]string{filepath.Join("..", "README.md")}, docs...)
	for _, doc := range docs {
		blocks := goBlocks(t, doc)
		if filepath.Base(doc) == "README.md" && len(blocks) == 0 {
			t.Errorf("%s has no go block: it must show the SDK", doc)
		}
		for _, b := range blocks {
			if _, ok := bodies[b.text]; !ok {
				t.Errorf("%s:%d: this go block is not the body of any Example function under sdk/ "+
					"(indented one tab less); make it one, as Example_service in example_service_test.go is", doc, b.line)
			}
		}
	}
}

// TestDocLinksStayInRepository: every relative link of README.md and
// docs/*.md names a file or directory inside the repository.
func TestDocLinksStayInRepository(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append([]string{filepath.Join(root, "README.md")}, docs...)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, doc := range docs {
		src, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(src), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path := filepath.Join(filepath.Dir(doc), filepath.FromSlash(target))
			if rel, err := filepath.Rel(root, path); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				t.Errorf("%s links %s, outside the repository", filepath.Base(doc), m[1])
			} else if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links %s, which does not exist", filepath.Base(doc), m[1])
			}
		}
	}
}

type goBlock struct {
	line int // of the opening fence
	text string
}

// goBlocks returns the ```go fenced blocks of a Markdown file.
func goBlocks(t *testing.T, path string) []goBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []goBlock
	var cur *goBlock
	var lines []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur, lines = &goBlock{line: n}, nil
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.text = strings.Join(lines, "\n")
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			lines = append(lines, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s:%d: unterminated go block", path, cur.line)
	}
	return out
}

// exampleBodies returns the bodies of every Example function in the test
// files under dir, without their braces and outer indentation.
func exampleBodies(t *testing.T, dir string) map[string]struct{} {
	t.Helper()
	bodies := map[string]struct{}{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Example") {
				continue
			}
			body := string(src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset])
			lines := strings.Split(strings.Trim(body, "\n"), "\n")
			for i, l := range lines {
				lines[i] = strings.TrimPrefix(l, "\t")
			}
			bodies[strings.Join(lines, "\n")] = struct{}{}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bodies
}

// TestDocsStateTheReportJitter: the package doc and the README say what
// reporter.after does — the interval plus a random 0 to reportJitter,
// never less.
func TestDocsStateTheReportJitter(t *testing.T) {
	want := "0–" + strconv.Itoa(int(reportJitter*100)) + " %"
	for _, doc := range []string{"doc.go", filepath.Join("..", "README.md")} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(strings.ReplaceAll(string(b), "//", "")), " ")
		if !strings.Contains(text, want) || strings.Contains(text, "±") {
			t.Errorf("%s does not state the report jitter as %q (and no ±)", doc, want)
		}
	}
}
