// Package examples holds the shipped example configs. Demo is the offline
// support desk `switchboard serve` runs when given no config.
package examples

import _ "embed"

// Demo is examples/demo.yaml: the support desk on the built-in offline
// demo model.
//
//go:embed demo.yaml
var Demo []byte

// Support is examples/support.yaml: the same desk on real providers.
//
//go:embed support.yaml
var Support []byte
