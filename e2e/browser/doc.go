// Package browser drives the console (GET /console) in headless Chromium;
// see run.sh.
package browser
