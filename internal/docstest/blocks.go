// Package docstest finds the shell blocks of a Markdown document that are
// marked for the docs test, so that CI can run them exactly as written.
//
// A marked block is a fenced block whose info string is sh, preceded by a
// marker comment on the line before its opening fence:
//
//	<!-- docs-test: NAME [key=value | key="value with spaces"]... -->
//	```sh
//	...
//	```
//
// Every sh block of a document must be marked: an unmarked sh block, a
// marker not followed by an sh block, a duplicate name or a malformed
// marker is an error, so that no command can enter the document without
// a decision on how CI runs it.
package docstest

import (
	"bufio"
	"fmt"
	"regexp"
	"strings"
)

// Block is one marked sh block.
type Block struct {
	// Name is the marker's name, unique in the document.
	Name string
	// Attrs are the marker's key=value attributes.
	Attrs map[string]string
	// Text is the block's content, every line ending in a newline.
	Text string
	// Line is the 1-based line of the opening fence.
	Line int
}

var (
	markerRE = regexp.MustCompile(`^<!--\s*docs-test:\s*(.*?)\s*-->\s*$`)
	nameRE   = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	attrRE   = regexp.MustCompile(`^([a-z][a-z0-9-]*)=("[^"]*"|[^\s"]+)(\s+|$)`)
	fenceRE  = regexp.MustCompile("^(```+|~~~+)\\s*(\\S*)")
)

// Extract returns the marked blocks of the Markdown text doc, in order.
func Extract(doc string) ([]Block, error) {
	var (
		blocks  []Block
		seen    = map[string]int{}
		pending *Block // a marker waiting for its block's fence
		fence   string // the open fence, "" outside a fenced block
		inBlock *Block // the marked block being read
		body    strings.Builder
	)
	sc := bufio.NewScanner(strings.NewReader(doc))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if fence != "" {
			if closes(line, fence) {
				fence = ""
				if inBlock != nil {
					inBlock.Text = body.String()
					blocks = append(blocks, *inBlock)
					inBlock = nil
				}
				continue
			}
			if inBlock != nil {
				body.WriteString(line + "\n")
			}
			continue
		}
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			fence = m[1]
			isSh := m[2] == "sh"
			switch {
			case pending != nil && !isSh:
				return nil, fmt.Errorf("line %d: the docs-test marker %q is followed by a %q block, want sh", n, pending.Name, m[2])
			case pending != nil:
				pending.Line = n
				inBlock, pending = pending, nil
				body.Reset()
			case isSh:
				return nil, fmt.Errorf("line %d: an sh block without a docs-test marker on the line before it", n)
			}
			continue
		}
		if m := markerRE.FindStringSubmatch(line); m != nil {
			if pending != nil {
				return nil, fmt.Errorf("line %d: the docs-test marker %q is not followed by an sh block", n-1, pending.Name)
			}
			b, err := parseMarker(m[1])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			if prev, ok := seen[b.Name]; ok {
				return nil, fmt.Errorf("line %d: docs-test block %q is already marked at line %d", n, b.Name, prev)
			}
			seen[b.Name] = n
			pending = &b
			continue
		}
		if pending != nil {
			return nil, fmt.Errorf("line %d: the docs-test marker %q is not followed by an sh block", n-1, pending.Name)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	switch {
	case pending != nil:
		return nil, fmt.Errorf("the docs-test marker %q ends the document", pending.Name)
	case fence != "":
		return nil, fmt.Errorf("a fenced block is not closed at the end of the document")
	}
	return blocks, nil
}

// parseMarker parses a marker's content: a name and key=value attributes.
func parseMarker(s string) (Block, error) {
	name, rest, _ := strings.Cut(s, " ")
	if !nameRE.MatchString(name) {
		return Block{}, fmt.Errorf("docs-test marker %q: want a name of lower-case letters, digits and dashes first", s)
	}
	b := Block{Name: name, Attrs: map[string]string{}}
	for rest = strings.TrimSpace(rest); rest != ""; {
		m := attrRE.FindStringSubmatch(rest)
		if m == nil {
			return Block{}, fmt.Errorf("docs-test marker %q: %q is not key=value or key=\"value\"", name, rest)
		}
		if _, dup := b.Attrs[m[1]]; dup {
			return Block{}, fmt.Errorf("docs-test marker %q: %s given twice", name, m[1])
		}
		b.Attrs[m[1]] = strings.Trim(m[2], `"`)
		rest = rest[len(m[0]):]
	}
	return b, nil
}

// closes reports whether line closes a fenced block opened by fence: the
// fence's character, at least as many times, and nothing else.
func closes(line, fence string) bool {
	t := strings.TrimSpace(line)
	return len(t) >= len(fence) && strings.Trim(t, fence[:1]) == ""
}
