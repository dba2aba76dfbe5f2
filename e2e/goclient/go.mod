module github.com/switchboard-ai/switchboard/e2e/goclient

go 1.26.8

require github.com/openai/openai-go/v3 v3.99.0

require (
	github.com/coder/websocket v1.8.15 // indirect
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3 // indirect
	github.com/tidwall/gjson v1.20.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	golang.org/x/text v0.42.0 // indirect
)

// The schema judge (internal/openapicheck) is the main module's; the
// import path keeps it internal to this repository.
require github.com/switchboard-ai/switchboard v0.0.0

replace github.com/switchboard-ai/switchboard => ../..
