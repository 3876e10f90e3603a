module github.com/pagpolar/pagpolar-go

go 1.26.8
