// 2PL as the Stan User's Guide writes an IRT model ("Item-response theory models"): one vectorized
// bernoulli_logit over the responses in long format, theta ~ N(0, 1), a ~ LogNormal(0, 0.5),
// d ~ N(0, 2) (bayesirt's models/2pl.toml). Used by benchmarks/nuts_stan.py.
data {
  int<lower=1> I;                          // items
  int<lower=2> M;                          // models (respondents)
  int<lower=1> N;                          // observed responses
  array[N] int<lower=1, upper=I> ii;       // item of response n
  array[N] int<lower=1, upper=M> mm;       // model of response n
  array[N] int<lower=0, upper=1> y;
}
parameters {
  vector[M] theta;
  vector<lower=0>[I] a;
  vector[I] d;
}
model {
  theta ~ normal(0, 1);
  a ~ lognormal(0, 0.5);
  d ~ normal(0, 2);
  y ~ bernoulli_logit(a[ii] .* theta[mm] + d[ii]);
}
