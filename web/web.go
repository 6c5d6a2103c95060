// Package web holds the console's HTML templates and static assets,
// embedded in the binary so that running the console needs no Node build.
// It contains no Go logic; server/webui renders and serves these files.
package web

import "embed"

// FS holds templates/*.html, templates/sections/*.html (the sections job
// domains add to shared pages) and static/*.
//
//go:embed templates/*.html templates/sections/*.html static/*
var FS embed.FS
