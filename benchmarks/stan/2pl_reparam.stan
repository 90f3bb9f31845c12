// The same 2PL posterior in bayesirt's parameterization (bayesirt/models/logistic.py):
//   theta = theta_mean + theta_deviation,  theta_mean ~ N(0, 1 / sqrt(M)),
//   theta_deviation ~ ZeroSumNormal(1)   (sum_to_zero_vector: an isometric, linear transform, so
//                                         normal(0, 1) on it is PyMC's ZeroSumNormal(sigma = 1)),
//   d = d_centered - a * theta_mean       (unit Jacobian), so d ~ N(0, 2) reads d_centered ~ N(a * theta_mean, 2)
// and the likelihood sees a * theta_deviation + d_centered: the common shift of abilities against
// intercepts is left to the priors. Together theta ~ iid N(0, 1), a ~ LogNormal(0, 0.5), d ~ N(0, 2),
// exactly the naive model's posterior. Used by benchmarks/nuts_stan.py.
data {
  int<lower=1> I;
  int<lower=2> M;
  int<lower=1> N;
  array[N] int<lower=1, upper=I> ii;
  array[N] int<lower=1, upper=M> mm;
  array[N] int<lower=0, upper=1> y;
}
parameters {
  real theta_mean;
  sum_to_zero_vector[M] theta_deviation;
  vector<lower=0>[I] a;
  vector[I] d_centered;
}
model {
  theta_mean ~ normal(0, inv_sqrt(M));
  theta_deviation ~ normal(0, 1);
  a ~ lognormal(0, 0.5);
  d_centered ~ normal(a * theta_mean, 2);
  y ~ bernoulli_logit(a[ii] .* theta_deviation[mm] + d_centered[ii]);
}
generated quantities {
  vector[M] theta = theta_mean + theta_deviation;
  vector[I] d = d_centered - a * theta_mean;
}
