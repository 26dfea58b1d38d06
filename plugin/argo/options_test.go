package argo

import (
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestOptionsValidate(t *testing.T) {
	cases := map[string]struct {
		mod     func(*Options)
		wantErr string
	}{
		"defaults":                   {},
		"no namespace":               {mod: func(o *Options) { o.Namespace = "" }, wantErr: "namespace"},
		"hold past the agent budget": {mod: func(o *Options) { o.HoldMax = 30 * time.Second }, wantErr: "holdMax"},
		"negative hold":              {mod: func(o *Options) { o.HoldMax = -time.Second }, wantErr: "holdMax"},
		"sub-second requeue":         {mod: func(o *Options) { o.Requeue = time.Millisecond }, wantErr: "requeue"},
		"negative cap":               {mod: func(o *Options) { o.MaxHeld = -1 }, wantErr: "maxHeld"},
		"negative qps":               {mod: func(o *Options) { o.QPS = -1 }, wantErr: "qps"},
		"negative burst":             {mod: func(o *Options) { o.Burst = -1 }, wantErr: "burst"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := Options{Namespace: "ns", HoldMax: DefaultHoldMax}
			o.Default()
			if tc.mod != nil {
				tc.mod(&o)
			}
			err := o.Validate()
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

func TestTemplateTimeout(t *testing.T) {
	ads := func(s string) *intstr.IntOrString { v := intstr.Parse(s); return &v }
	cases := map[string]struct {
		tmpl    wfv1.Template
		want    time.Duration
		wantErr bool
	}{
		"none":                      {},
		"duration":                  {tmpl: wfv1.Template{Timeout: "30m"}, want: 30 * time.Minute},
		"seconds":                   {tmpl: wfv1.Template{Timeout: "90"}, want: 90 * time.Second},
		"activeDeadlineSeconds":     {tmpl: wfv1.Template{ActiveDeadlineSeconds: ads("60")}, want: time.Minute},
		"the shorter of the two":    {tmpl: wfv1.Template{Timeout: "30m", ActiveDeadlineSeconds: ads("60")}, want: time.Minute},
		"unparsable timeout":        {tmpl: wfv1.Template{Timeout: "soon"}, wantErr: true},
		"unparsable active seconds": {tmpl: wfv1.Template{ActiveDeadlineSeconds: ads("{{x}}")}, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, errs := templateTimeout(&tc.tmpl)
			assert.Equal(t, tc.wantErr, len(errs) > 0, "%v", errs)
			assert.Equal(t, tc.want, got)
		})
	}
}
