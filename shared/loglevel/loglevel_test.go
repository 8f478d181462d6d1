package loglevel

import (
	"testing"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func TestVerbosity(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		level   operatorv1.LogLevel
		want    int
		wantErr string
	}{
		{name: "When the level is empty, it should be Normal's 2", level: "", want: 2},
		{name: "When the level is Normal, it should be 2", level: operatorv1.Normal, want: 2},
		{name: "When the level is Debug, it should be 4", level: operatorv1.Debug, want: 4},
		{name: "When the level is Trace, it should be 6", level: operatorv1.Trace, want: 6},
		{name: "When the level is TraceAll, it should be 8", level: operatorv1.TraceAll, want: 8},
		{
			name:    "When the level is misspelt, it should fail naming the accepted levels",
			level:   "debug",
			wantErr: `unknown log level "debug": use Normal, Debug, Trace or TraceAll`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			got, err := Verbosity(tt.level)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(tt.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestLive_Set(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		start, set  int
		wantChanged bool
	}{
		{name: "When the verbosity is raised, it should report a change", start: 2, set: 6, wantChanged: true},
		{name: "When the verbosity is lowered, it should report a change", start: 8, set: 2, wantChanged: true},
		{name: "When the verbosity is set to what it is, it should report no change", start: 4, set: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			l := NewLive(tt.start)
			g.Expect(l.Verbosity()).To(Equal(tt.start))
			g.Expect(l.Set(tt.set)).To(Equal(tt.wantChanged))
			g.Expect(l.Verbosity()).To(Equal(tt.set))
			// V(n) is zap level -n: a logger built with Level() logs V(set) and not V(set+1).
			g.Expect(l.Level().Enabled(zapcore.Level(-tt.set))).To(BeTrue())
			g.Expect(l.Level().Enabled(zapcore.Level(-tt.set - 1))).To(BeFalse())
		})
	}
}

func TestFromEnabler(t *testing.T) {
	t.Parallel()
	t.Run("When the flag produced an atomic level, it should adopt it so that Set reaches the logger built with it", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		flagLevel := zap.NewAtomicLevelAt(zapcore.Level(-3))
		l := FromEnabler(flagLevel, 2)
		g.Expect(l.Verbosity()).To(Equal(3))
		l.Set(5)
		g.Expect(flagLevel.Level()).To(Equal(zapcore.Level(-5)))
	})
	tests := []struct {
		name    string
		enabler zapcore.LevelEnabler
	}{
		{name: "When there is no enabler, it should start at the given verbosity", enabler: nil},
		{name: "When the enabler is a fixed level, it should start at the given verbosity", enabler: zapcore.InfoLevel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			g.Expect(FromEnabler(tt.enabler, 4).Verbosity()).To(Equal(4))
		})
	}
}

func TestLive_Follow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		level    operatorv1.LogLevel
		want     int
		wantLogs int
	}{
		{name: "When the level changes the verbosity, it should set it and log the change once", level: operatorv1.Debug, want: 4, wantLogs: 1},
		{name: "When the level keeps the verbosity, it should log nothing", level: operatorv1.Normal, want: 2},
		{name: "When the level is unknown, it should keep the verbosity and log nothing", level: "Loud", want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			var logs int
			log := funcr.New(func(string, string) { logs++ }, funcr.Options{})
			l := NewLive(2)
			l.Follow(log, tt.level)
			g.Expect(l.Verbosity()).To(Equal(tt.want))
			g.Expect(logs).To(Equal(tt.wantLogs))
		})
	}

	t.Run("When there is no live level, it should neither panic nor log", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		var logs int
		log := funcr.New(func(string, string) { logs++ }, funcr.Options{})
		var l *Live
		g.Expect(func() { l.Follow(log, operatorv1.Trace) }).NotTo(Panic())
		g.Expect(logs).To(BeZero())
	})
}
