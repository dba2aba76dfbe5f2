package goclient_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/openapicheck"
)

// sdkTests are openai-go's own generated tests run against the gateway:
// the "every optional parameter" chat request, a plain one, and the model
// routes. They ask for the models gpt-6-astra and gpt-4o, which
// e2e/sdk.yaml serves as graphs over the fake upstream.
var sdkTests = []string{"TestChatCompletionNewWithOptionalParams", "TestUsage", "TestModelList", "TestModelGet"}

// TestSDKGeneratedTests runs openai-go's test binary (built by e2e/run.sh
// from the module zip, `go test -c github.com/openai/openai-go/v3`) with
// TEST_API_BASE_URL pointed at the gateway, through a proxy that has the
// published schema judge every answer.
func TestSDKGeneratedTests(t *testing.T) {
	bin := need(t, "OPENAI_GO_TEST_BIN")
	target, err := url.Parse(need(t, "SDK_GATEWAY_URL"))
	if err != nil {
		t.Fatal(err)
	}
	check := openapicheck.ForTest(t)
	if check == nil {
		t.Fatal("the published schema is needed to judge the gateway (../shared/specs)")
	}
	judged := 0
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		n, err := check.CheckReply(resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		if err != nil {
			t.Errorf("%s %s: the published OpenAI schema refuses the reply: %v", resp.Request.Method, resp.Request.URL.Path, err)
		}
		judged += n // the SDK's tests run one at a time
		return nil
	}
	front := httptest.NewServer(proxy)
	defer front.Close()

	f := newFake(t, fakeReply{Text: "This is a test."}, fakeReply{Text: "This is a test."})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run", "^("+strings.Join(sdkTests, "|")+")$", "-test.v", "-test.count=1")
	// Without SKIP_MOCK_TESTS an unreachable server fails the SDK's tests
	// instead of skipping them.
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "SKIP_MOCK_TESTS=") || strings.HasPrefix(kv, "TEST_API_BASE_URL=")
	}), "TEST_API_BASE_URL="+front.URL+"/v1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("openai-go's tests failed: %v\n%s", err, out)
	}
	results := map[string]string{}
	re := regexp.MustCompile(`^--- (PASS|FAIL|SKIP): (\w+) `)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			results[m[2]] = m[1]
		}
	}
	for _, name := range sdkTests {
		if results[name] != "PASS" {
			t.Errorf("%s: %q, want PASS\n%s", name, results[name], out)
		}
	}
	if len(results) != len(sdkTests) {
		t.Errorf("ran %v, want exactly %v", results, sdkTests)
	}
	if judged < 4 {
		t.Errorf("the schema judged %d answers, want at least 4", judged)
	}

	// Both chat requests reached the provider, each as its graph's agent,
	// with the sampling parameters the gateway passes on.
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("upstream calls: %v", f.models())
	}
	var every map[string]any
	for _, r := range reqs {
		if r.Body.Model == "astra-model" {
			_ = json.Unmarshal(r.Raw, &struct {
				Body *map[string]any `json:"body"`
			}{&every})
		}
	}
	if every == nil {
		t.Fatalf("no request for gpt-6-astra upstream: %v", f.models())
	}
	for k, want := range map[string]any{"temperature": 1.0, "top_p": 1.0, "presence_penalty": -2.0, "frequency_penalty": -2.0, "user": "user-1234", "parallel_tool_calls": true} {
		if every[k] != want {
			t.Errorf("upstream %s = %v, want %v", k, every[k], want)
		}
	}
}
