// Package nothing registers no module: the builder must say so.
package nothing

// Answer is here so the package is not empty.
const Answer = 42
