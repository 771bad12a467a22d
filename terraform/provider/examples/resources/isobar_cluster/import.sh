tofu import isobar_cluster.sa_east sa-east
