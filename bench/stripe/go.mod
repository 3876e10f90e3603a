module github.com/pagpolar/pagpolar-go/bench/stripe

go 1.26.0

require github.com/pagpolar/pagpolar-go v0.0.0

require github.com/stripe/stripe-go/v85 v85.0.0

replace github.com/pagpolar/pagpolar-go => ../..
