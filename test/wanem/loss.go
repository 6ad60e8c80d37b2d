package wanem

import (
	"fmt"
	"math/rand/v2"
)

// GilbertElliott is the two-state bursty loss model: the link is Good or Bad, moves
// Good→Bad with probability P and Bad→Good with probability R at every packet, and
// loses a packet with probability LossGood in Good and LossBad in Bad (netem's "loss
// gemodel p r 1-h 1-k" with 1-h = LossBad and 1-k = LossGood). The long-run loss rate
// is (R·LossGood + P·LossBad)/(P+R); the mean burst in Bad lasts 1/R packets.
type GilbertElliott struct {
	P        float64 `json:"p"`
	R        float64 `json:"r"`
	LossGood float64 `json:"lossGood"`
	LossBad  float64 `json:"lossBad"`
}

// MeanLoss is the stationary loss probability of the model.
func (g GilbertElliott) MeanLoss() float64 {
	if g.P+g.R == 0 {
		return g.LossGood
	}
	return (g.R*g.LossGood + g.P*g.LossBad) / (g.P + g.R)
}

func (g GilbertElliott) validate() error {
	for name, v := range map[string]float64{"p": g.P, "r": g.R, "lossGood": g.LossGood, "lossBad": g.LossBad} {
		if !(v >= 0 && v <= 1) {
			return fmt.Errorf("gilbertElliott.%s: %v is not a probability in [0,1]", name, v)
		}
	}
	if g.P > 0 && g.R == 0 {
		return fmt.Errorf("gilbertElliott.r: 0 with p %v would stay in Bad forever", g.P)
	}
	return nil
}

// lossModel decides, packet by packet on the wire, whether the packet is lost. It is
// used by one goroutine at a time (the direction's reader, under its lock).
type lossModel struct {
	random float64
	ge     *GilbertElliott
	bad    bool
	rng    *rand.Rand
}

func newLossModel(random float64, ge *GilbertElliott, rng *rand.Rand) lossModel {
	var g *GilbertElliott
	if ge != nil {
		c := *ge
		g = &c
	}
	return lossModel{random: random, ge: g, rng: rng}
}

// lose advances the model by one packet and reports whether that packet is lost.
func (m *lossModel) lose() bool {
	if m.ge != nil {
		// Move first, then draw the loss in the new state (netem's order).
		if m.bad {
			if m.rng.Float64() < m.ge.R {
				m.bad = false
			}
		} else if m.rng.Float64() < m.ge.P {
			m.bad = true
		}
		p := m.ge.LossGood
		if m.bad {
			p = m.ge.LossBad
		}
		if p > 0 && m.rng.Float64() < p {
			return true
		}
	}
	return m.random > 0 && m.rng.Float64() < m.random
}
