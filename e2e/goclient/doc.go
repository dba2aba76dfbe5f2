// Package goclient holds the end-to-end tests that judge the built gateway
// with the official Go client, github.com/openai/openai-go/v3, and with
// OpenAI's published schema (see the repository README, "Conformance").
// It is its own module so that the main go.mod stays lean; e2e/run.sh
// starts the gateway and runs it.
package goclient
