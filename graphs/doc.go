// Package graphs reads Switchboard's configuration and compiles it into an
// immutable Set of graphs that requests read concurrently and never
// re-validate. It is a leaf: it imports no other package of the project
// (a test in internal/layering checks it), so every other package may use
// its types.
//
// How the pieces fit:
//
//   - load.go reads YAML (strict.go rejects unknown keys, ${VAR} comes from
//     the environment) into the raw config of config.go.
//   - compile.go, agents.go, handoffs.go and schema.go validate it, apply
//     the defaults (declared once, in defaults.go) and build the compiled
//     types of graph.go: Set, Graph, Agent, Handoff, Tool, Provider. Every
//     problem is reported, one line each, before the gateway listens.
//   - A Tool is a small tagged union (Kind and one field per kind: HTTP
//     today); a new kind of tool is a new kind and field here and a new
//     runner in runtime.ToolKinds, never a branch in the run loop.
//   - names.go derives handoff tool names; describe.go and diagram.go print
//     a config for `switchboard validate` and `switchboard graph`.
//
// docs/config.md is the user's reference for what this package accepts.
package graphs
