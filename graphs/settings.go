package graphs

import "go.yaml.in/yaml/v3"

// rawModelSettings is an agent's `model_settings:` (CONTRACT §8).
type rawModelSettings struct {
	Temperature         *float32 `yaml:"temperature"`
	TopP                *float32 `yaml:"top_p"`
	MaxTokens           *int     `yaml:"max_tokens"`
	MaxCompletionTokens *int     `yaml:"max_completion_tokens"`
	ReasoningEffort     string   `yaml:"reasoning_effort"`
	Seed                *int     `yaml:"seed"`
	ParallelToolCalls   *bool    `yaml:"parallel_tool_calls"`
	PresencePenalty     *float32 `yaml:"presence_penalty"`
	FrequencyPenalty    *float32 `yaml:"frequency_penalty"`
	// Stop is one string or a list of them.
	Stop yaml.Node `yaml:"stop"`
}

// ModelSettings are an agent's sampling parameters. They go with every
// model call of the agent and win over the client's parameters of the same
// name; nil (or empty) fields leave the client's.
type ModelSettings struct {
	Temperature         *float32
	TopP                *float32
	MaxTokens           *int
	MaxCompletionTokens *int
	ReasoningEffort     string
	Seed                *int
	ParallelToolCalls   *bool
	PresencePenalty     *float32
	FrequencyPenalty    *float32
	Stop                []string // nil: not set
}

// compileModelSettings checks an agent's model_settings; nil when absent.
func compileModelSettings(r *rawModelSettings, subject string, p *problems) *ModelSettings {
	if r == nil {
		return nil
	}
	where := subject + ": model_settings"
	s := &ModelSettings{
		Temperature: r.Temperature, TopP: r.TopP, MaxTokens: r.MaxTokens, MaxCompletionTokens: r.MaxCompletionTokens,
		ReasoningEffort: r.ReasoningEffort, Seed: r.Seed, ParallelToolCalls: r.ParallelToolCalls,
		PresencePenalty: r.PresencePenalty, FrequencyPenalty: r.FrequencyPenalty,
	}
	if t := s.Temperature; t != nil && (*t < 0 || *t > 2) {
		p.addf("%s: temperature must be between 0 and 2, got %g", where, *t)
	}
	if t := s.TopP; t != nil && (*t < 0 || *t > 1) {
		p.addf("%s: top_p must be between 0 and 1, got %g", where, *t)
	}
	for name, v := range map[string]*int{"max_tokens": s.MaxTokens, "max_completion_tokens": s.MaxCompletionTokens} {
		if v != nil && *v < 1 {
			p.addf("%s: %s must be at least 1, got %d", where, name, *v)
		}
	}
	for name, v := range map[string]*float32{"presence_penalty": s.PresencePenalty, "frequency_penalty": s.FrequencyPenalty} {
		if v != nil && (*v < -2 || *v > 2) {
			p.addf("%s: %s must be between -2 and 2, got %g", where, name, *v)
		}
	}
	n := deref(&r.Stop)
	switch {
	case isNull(n):
	case n.Kind == yaml.ScalarNode:
		s.Stop = []string{n.Value}
	case n.Kind == yaml.SequenceNode:
		s.Stop = []string{}
		for _, item := range n.Content {
			if item = deref(item); item.Kind != yaml.ScalarNode || isNull(item) {
				p.addf("%s: stop must be a string or a list of strings, got %s (line %d)", where, describeNode(item), item.Line)
				continue
			}
			s.Stop = append(s.Stop, item.Value)
		}
	default:
		p.addf("%s: stop must be a string or a list of strings, got %s (line %d)", where, describeNode(n), n.Line)
	}
	return s
}

// compileGraphRun applies a graph's `instructions:` and
// `max_tokens_per_run:`.
func compileGraphRun(r *rawGraph, g *Graph, subject string, p *problems) {
	g.Instructions = r.Instructions
	if r.MaxTokensPerRun != nil {
		if *r.MaxTokensPerRun < 1 {
			p.addf("%s: max_tokens_per_run must be at least 1, got %d (leave it out for no budget)", subject, *r.MaxTokensPerRun)
		} else {
			g.MaxTokensPerRun = *r.MaxTokensPerRun
		}
	}
}
