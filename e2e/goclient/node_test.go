package goclient_test

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"

	"github.com/switchboard-ai/switchboard/internal/openapicheck"
)

// recordedReply is one answer the Node suite read from the gateway, as
// e2e/helpers.mjs records it.
type recordedReply struct {
	Test        string `json:"test"`
	Method      string `json:"method"`
	Path        string `json:"path"`
	Status      int    `json:"status"`
	ContentType string `json:"contentType"`
	Body        string `json:"body"`
}

// TestNodeSuiteReplies has the published schema judge every answer the
// Node suite (the official openai Node client, which checks little of the
// shape) read whole: e2e/run.sh runs the Node suite first with
// E2E_REPLIES naming the file its helpers append to.
func TestNodeSuiteReplies(t *testing.T) {
	path := need(t, "E2E_REPLIES")
	check := openapicheck.ForTest(t)
	if check == nil {
		t.Fatal("the published schema is needed to judge the gateway (../shared/specs)")
	}
	file, err := os.Open(path)
	if err != nil {
		t.Fatalf("the Node suite's replies: %v", err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	replies, judged := 0, 0
	for sc.Scan() {
		var r recordedReply
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s line %d: %v", path, replies+1, err)
		}
		replies++
		n, err := check.CheckReply(r.Method, r.Path, r.Status, r.ContentType, []byte(r.Body))
		if err != nil {
			t.Errorf("Node test %q, %s %s: the published OpenAI schema refuses the reply: %v", r.Test, r.Method, r.Path, err)
		}
		judged += n
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	// The suite's streams, errors, replies and model lists: far more than
	// a handful; none means the recording broke.
	if judged < 20 {
		t.Fatalf("judged %d bodies of %d replies the Node suite recorded; want at least 20", judged, replies)
	}
	t.Logf("judged %d bodies of %d replies the Node suite read", judged, replies)
}
