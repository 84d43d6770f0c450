#!/usr/bin/env python3
"""Does an A/A pair's offset follow the servers' history within a round (issue #47)?

In a round of duets `io_uring` takes part in more duets than `io_uring-control` (it is compared
with rx and across profiles too), so by the time their own duet runs one may have served more
requests since its launch than the other. For every A/A duet of the runs given (raw.json or
raw.json.gz), this counts the duets each of the two took part in earlier in its round (by the
slices' start times) and regresses the duet's ln(control / io_uring) CPU per request on the
difference. A slope near 0 says the history does not set the pair apart.

Usage: scripts/pair-history.py RAW... (needs numpy)
"""
import json,gzip,sys,math,collections,statistics as st
import numpy as np
def load(p): return json.load(gzip.open(p) if p.endswith('.gz') else open(p))
xs=[];ys=[]
for path in sys.argv[1:]:
    r=load(path)
    # per (round, pass-ish): slices sorted by at_s; count prior duets per server within same round+load stage
    by_round=collections.defaultdict(list)
    for s in r['slices']:
        if s.get('duet'): by_round[s['round']].append(s)
    for rnd,sl in by_round.items():
        sl.sort(key=lambda s:(s['at_s'],s['position']))
        seen=collections.Counter(); done=set()
        duets=collections.OrderedDict()
        for s in sl:
            k=(s['position'],str(s['load']),s['conns'])
            duets.setdefault(k,[]).append(s)
        for k,pair in duets.items():
            if len(pair)!=2: continue
            a,b=pair
            ka=(a['server']['profile'],a['server']['config']); kb=(b['server']['profile'],b['server']['config'])
            if ka[0]==kb[0] and {ka[1],kb[1]}=={'io_uring','io_uring-control'}:
                c,u=(a,b) if ka[1]=='io_uring-control' else (b,a)
                kc=(c['server']['profile'],'io_uring-control'); ku=(u['server']['profile'],'io_uring')
                def cpr(s):
                    rep=s.get('report') or {}
                    return s['server_cpu_ns']/rep['requests'] if s.get('server_cpu_ns') and rep.get('requests') and not s.get('error') else None
                vc,vu=cpr(c),cpr(u)
                if vc and vu:
                    xs.append(seen[kc]-seen[ku]); ys.append(math.log(vc/vu))
            seen[ka]+=1; seen[kb]+=1
x=np.array(xs);y=np.array(ys)
print('n',len(x),'mean dx',x.mean(),'sd dx',x.std())
A=np.vstack([np.ones_like(x),x]).T
coef,res,_,_=np.linalg.lstsq(A,y,rcond=None)
resid=y-A@coef; s2=resid@resid/(len(y)-2); cov=s2*np.linalg.inv(A.T@A)
print('intercept %.4f%% slope %.4f%% per duet (se %.4f%%), t %.2f'%(coef[0]*100,coef[1]*100,math.sqrt(cov[1,1])*100,coef[1]/math.sqrt(cov[1,1])))
for lo,hi in [(-99,-3),(-2,-1),(0,0),(1,2),(3,99)]:
    m=(x>=lo)&(x<=hi)
    if m.sum(): print(lo,hi,m.sum(),'%.3f%%'%(y[m].mean()*100))
