// Package deps holds the engine modules in go.mod while the faces that use them are written.
package deps

import (
	_ "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	_ "github.com/argoproj/argo-workflows/v3/pkg/plugins/executor"
	_ "github.com/gin-gonic/gin"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	_ "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1beta1"
	_ "knative.dev/pkg/apis"
)
