package runtime

import (
	"strconv"

	"github.com/switchboard-ai/switchboard/graphs"
)

// paramsFor returns the parameters of a model call of agent a: the agent's
// model_settings over the client's parameters (CONTRACT §8), which fill in
// the rest. With no settings the client's are used as they are.
func paramsFor(a *graphs.Agent, client *Params) *Params {
	s := a.Settings
	if s == nil {
		return client
	}
	var p Params
	if client != nil {
		p = *client
	}
	setFloat(&p.Temperature, s.Temperature)
	setFloat(&p.TopP, s.TopP)
	setAs(&p.MaxTokens, s.MaxTokens)
	setAs(&p.MaxCompletionTokens, s.MaxCompletionTokens)
	setAs(&p.Seed, s.Seed)
	setIf(&p.ParallelToolCalls, s.ParallelToolCalls)
	setFloat(&p.PresencePenalty, s.PresencePenalty)
	setFloat(&p.FrequencyPenalty, s.FrequencyPenalty)
	if s.ReasoningEffort != "" {
		p.ReasoningEffort = s.ReasoningEffort
	}
	if s.Stop != nil {
		p.Stop = s.Stop
	}
	return &p
}

// setIf sets *dst to v when v is set.
func setIf[T any](dst **T, v *T) {
	if v != nil {
		*dst = v
	}
}

// setAs sets *dst to v as an IntParam when v is set.
func setAs(dst **IntParam, v *int) {
	if v != nil {
		d := IntParam(*v)
		*dst = &d
	}
}

// setFloat sets *dst to v when v is set, as the float64 of the decimal v
// was written as (0.2, not the float32's 0.20000000298023224).
func setFloat(dst **float64, v *float32) {
	if v != nil {
		d, _ := strconv.ParseFloat(strconv.FormatFloat(float64(*v), 'g', -1, 32), 64)
		*dst = &d
	}
}

// instructionsFor returns the instructions agent a runs with in graph g:
// its own, then the graph's after a blank line (CONTRACT §8).
func instructionsFor(a *graphs.Agent, g *graphs.Graph) string {
	switch {
	case g.Instructions == "":
		return a.Instructions
	case a.Instructions == "":
		return g.Instructions
	}
	return a.Instructions + "\n\n" + g.Instructions
}
