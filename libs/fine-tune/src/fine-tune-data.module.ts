import { Module } from '@nestjs/common';
import { FineTunesRepository } from './fine-tunes.repository';
import { TrainersRepository } from './trainers.repository';

/** The fine-tune repositories, for the fine-tune service (and its stale-reservation rule, which lives in a module of its own). */
@Module({ providers: [FineTunesRepository, TrainersRepository], exports: [FineTunesRepository, TrainersRepository] })
export class FineTuneDataModule {}
