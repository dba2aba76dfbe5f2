package runtime

import "github.com/switchboard-ai/switchboard/graphs"

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
	setIf(&p.Temperature, s.Temperature)
	setIf(&p.TopP, s.TopP)
	setIf(&p.MaxTokens, s.MaxTokens)
	setIf(&p.MaxCompletionTokens, s.MaxCompletionTokens)
	setIf(&p.Seed, s.Seed)
	setIf(&p.ParallelToolCalls, s.ParallelToolCalls)
	setIf(&p.PresencePenalty, s.PresencePenalty)
	setIf(&p.FrequencyPenalty, s.FrequencyPenalty)
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
