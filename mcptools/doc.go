// Package mcptools gives agents the tools of MCP servers (the
// `mcp_servers:` of a config), with the official Go SDK.
//
// A Manager connects to every server when it starts (a stdio server is a
// process it starts, in a process group of its own; a streamable HTTP server
// is a URL) and lists its tools. A server that cannot be reached is retried
// in the background with backoff, and its tools are offered once it answers.
// Once listed, a server's tools stay offered: while it is down a call fails
// at once and the manager reconnects by itself; a session that breaks (the
// process exits, a call finds the connection gone, a periodic ping fails) is
// reopened the same way. Every call is bounded by the server's timeout, so a
// server that hangs or dies mid-call fails the call, never the run.
//
// Tools returns what an agent is offered now. A tool whose name is not a
// valid function name, or clashes with another tool or handoff of the
// agent, is not offered, and the problem is logged once as a config error;
// so is one that clashes with a memory tool of a graph the agent runs in,
// which the run offers in its place.
// Call returns a result's text (text parts joined by newlines, structured
// content as JSON); a result marked isError, one over 1 MiB, and a call
// that failed are errors, which the run reports to the model as
// tool_failed.
//
// runtime does not import this package: internal/app wires a Manager into
// the run loop's tool runner.
package mcptools
